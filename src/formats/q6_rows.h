// tritium formats: 6-bit row-grouped weights for the output head (lm_head), "q6".
//
// W [N, K] (row-major, N = vocabulary for lm_head) is cut into groups of 32 consecutive columns per row.
// Each group gets one fp16 scale s and codes q = clamp(round_half_even(w / s), -31, 31) (s == 0 gives q = 0).
// s is the candidate (s, L) with the least |w - s L|^2 (the first on a tie): s0 = f16(absmax / 31) with
// L = clamp(round(w / s0), -31, 31), and for d in {30.1, 30.4, 30.7, 31.3, 31.6, 31.9} the codes
// L = clamp(round(w d / absmax), -31, 31) with their least-squares scale f16(sum(w L) / sum(L^2)), a shorter form
// of the search ggml's make_qx_quants makes for Q6_K's scales. It lowers the mean KL divergence of the tiny-bitnet
// head from the bf16 head by 10-13% against s0 alone (bench/RESULTS.md, "Output head formats").
// Codes are stored as unsigned 6-bit values u = q + 32 (1..63; 0 unused) split into a 4-bit low plane and a
// 2-bit high plane, as llama.cpp's Q6_K does.
// Byte layout of "codes" (uint8 [N, 3 K / 4]): row n, block b of 64 columns, 48 bytes at n * 3K/4 + 48 b:
//   bytes  0..31 (low plane):  byte j holds bits 0-3 of u[64 b + j] in its low nibble and bits 0-3 of
//                              u[64 b + 32 + j] in its high nibble (the q4 layout);
//   bytes 32..47 (high plane): byte j holds bits 4-5 of u[64 b + j], u[64 b + 16 + j], u[64 b + 32 + j],
//                              u[64 b + 48 + j] in its bits 0-1, 2-3, 4-5, 6-7.
// The AVX2 kernel (kernels/cpu/q6_gemm_avx2.cpp) rebuilds each group's 32 codes in column order with one mask of
// the low plane and a per-lane variable shift and mask of the high plane; the AVX-512 kernel (q6_gemm_avx512.cpp)
// a whole block of 64 the same way with per-half shifts and per-lane rotations. "scales": fp16 [N, K / 32].
// Size: 6 + 16 / 32 = 6.5 bits per weight. K must be a multiple of 64.
//
// Product (kernels/cpu/q6_gemm.h): activations are int8 per token (absmax, as the ternary layers do):
//   y[m, n] = act_scale[m] * sum_g s[n, g] * (sum_{k in g} (u[n, k] - 32) * x[m, k]),
// the inner sums exact in int32, the float sum over groups in the kernel's lane order (results agree with the
// scalar reference to float rounding, not bit for bit).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tritium {

inline constexpr int64_t kQ6Group = 32;

struct Q6Rows {
  int64_t n = 0, k = 0;
  std::vector<uint8_t> codes;    ///< uint8 [N, 3 K / 4], see the file comment
  std::vector<uint16_t> scales;  ///< fp16 [N, K / 32]
  size_t bytes() const { return codes.size() + 2 * scales.size(); }
  /// Bytes of one row of codes.
  int64_t row_bytes() const { return k / 4 * 3; }
  /// W ~= (u - 32) * s as float32 [N, K].
  std::vector<float> dequantize() const;
};

/// Quantizes w float32 [N, K] (scales chosen as in the file comment). Throws tritium::Error when K % 64 != 0, a shape is not positive, a weight is not
/// finite, or a group's absmax / 31 exceeds the fp16 range.
Q6Rows quantize_q6_rows(const float* w, int64_t n, int64_t k);

/// Checks sizes of a Q6Rows built from saved buffers; throws tritium::Error naming `what` otherwise.
void validate_q6_rows(const Q6Rows& q, const char* what);

/// The signed code (u - 32, in [-31, 31]) of column `col` of one row of `codes` (the byte layout above).
inline int q6_code(const uint8_t* row, int64_t col) {
  const uint8_t* blk = row + (col / 64) * 48;
  const int64_t c = col % 64;
  const int lo = c < 32 ? (blk[c] & 15) : (blk[c - 32] >> 4);
  const int hi = (blk[32 + c % 16] >> (2 * (c / 16))) & 3;
  return (lo | (hi << 4)) - 32;
}

}  // namespace tritium
