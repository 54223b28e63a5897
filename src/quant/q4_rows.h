// tritium quant: 4-bit row-grouped weights for the output head (lm_head), "q4".
//
// W [N, K] (row-major, N = vocabulary for lm_head) is cut into groups of 32 consecutive columns per row.
// Each group gets one fp16 scale s = f16(absmax / 7) and codes q = clamp(round_half_even(w / s), -7, 7)
// (s the fp16-rounded value; s == 0 gives q = 0), stored as unsigned nibbles u = q + 8 (1..15; 0 unused).
// Byte layout of "codes" (uint8 [N, K / 2]): row n, block b of 64 columns (32 bytes at n * K / 2 + 32 b):
// byte j (0..31) holds column 64 b + j in its low nibble and column 64 b + 32 + j in its high nibble, so a
// 32-byte load splits (mask / shift) into the 64 codes of the block in column order. "scales": fp16 [N, K / 32].
// Size: 4 + 16 / 32 = 4.5 bits per weight. K must be a multiple of 64.
//
// Product (q4_gemm): activations are int8 per token (absmax, as the ternary layers do):
//   y[m, n] = act_scale[m] * sum_g s[n, g] * (sum_{k in g} (u[n, k] - 8) * x[m, k]),
// the inner sums exact in int32, the float sum over groups in the kernel's lane order (results agree with the
// scalar reference to float rounding, not bit for bit).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tritium {

inline constexpr int64_t kQ4Group = 32;

struct Q4Rows {
  int64_t n = 0, k = 0;
  std::vector<uint8_t> codes;    ///< uint8 [N, K / 2], see the file comment
  std::vector<uint16_t> scales;  ///< fp16 [N, K / 32]
  size_t bytes() const { return codes.size() + 2 * scales.size(); }
  /// W ~= (u - 8) * s as float32 [N, K].
  std::vector<float> dequantize() const;
};

/// Quantizes w float32 [N, K]. Throws tritium::Error when K % 64 != 0, a shape is not positive, or a weight
/// is not finite.
Q4Rows quantize_q4_rows(const float* w, int64_t n, int64_t k);

/// Checks sizes of a Q4Rows built from saved buffers; throws tritium::Error naming `what` otherwise.
void validate_q4_rows(const Q4Rows& q, const char* what);

/// y float32 [M, N] = product above, for x int8 [M, K] with act_scale float [M]. Multithreaded over rows;
/// AVX-512 VNNI when the kernel path allows it, else a scalar loop.
void q4_gemm(const Q4Rows& w, const int8_t* x, const float* act_scale, int64_t M, float* y);
/// The scalar reference of q4_gemm (for tests).
void q4_gemm_ref(const Q4Rows& w, const int8_t* x, const float* act_scale, int64_t M, float* y);

namespace cpu {
/// AVX-512 VNNI rows [n0, n1) of one token: y[n] = act_scale * sum ... (see q4_gemm). xneg8: int32 [K / 4],
/// -8 * (sum of x over each group of 4 columns).
void q4_gemv_rows_avx512(const Q4Rows& w, const int8_t* x, const int32_t* xneg8, float act_scale, int64_t n0,
                         int64_t n1, float* y);
}  // namespace cpu

}  // namespace tritium
