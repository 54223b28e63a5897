// tritium formats: 4-bit row-grouped weights for the output head (lm_head), "q4".
//
// W [N, K] (row-major, N = vocabulary for lm_head) is cut into groups of 32 consecutive columns per row.
// Each group gets one fp16 scale s = f16(absmax / 7) and codes q = clamp(round_half_even(w / s), -7, 7)
// (s the fp16-rounded value; s == 0 gives q = 0), stored as unsigned nibbles u = q + 8 (1..15; 0 unused).
// Byte layout of "codes" (uint8 [N, K / 2]): row n, block b of 64 columns (32 bytes at n * K / 2 + 32 b):
// byte j (0..31) holds column 64 b + j in its low nibble and column 64 b + 32 + j in its high nibble, so a
// 32-byte load splits (mask / shift) into the 64 codes of the block in column order. "scales": fp16 [N, K / 32].
// Size: 4 + 16 / 32 = 4.5 bits per weight. K must be a multiple of 64.
//
// Product (kernels/cpu/q4_gemm.h): activations are int8 per token (absmax, as the ternary layers do):
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

/// The signed code (u - 8, in [-7, 7]) of column `col` of one row of `codes` (the byte layout above).
inline int q4_code(const uint8_t* row, int64_t col) {
  const uint8_t b = row[(col / 64) * 32 + (col % 32)];
  return ((col % 64) < 32 ? (b & 15) : (b >> 4)) - 8;
}

}  // namespace tritium
