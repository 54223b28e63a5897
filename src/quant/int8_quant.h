// tritium quant: int8 post-training quantization of float weights (LLM.int8() paper, Dettmers et
// al. 2022, sections 2-3) and the scalar quantization rules shared by weights and activations.
//
// Conventions (every method, weights and activations alike):
//  - A float matrix W [N, K] is row-major like HF Linear.weight: row n = output feature n.
//  - Symmetric (absmax) codes: q = clamp(round_half_even(double(v) * double(inv)), -127, 127) with
//    inv = 127.0f / absmax (fp32, correctly rounded) and dequantization v ~= q * scale with
//    scale = absmax / 127.0f (fp32). absmax == 0 gives inv = scale = 0 and q = 0.
//    The product v * inv is formed exactly in double, so the rounding is that of the exact product.
//  - -128 is never produced (the AVX2 sign trick needs |q| <= 127).
//  - Asymmetric (zero-point) codes use 254 steps over [min(lo, 0), max(hi, 0)] (the paper uses 255
//    over [lo, hi]; we keep one code unused so q stays in [-127, 127], and include 0 in the range
//    so that 0.0 is exactly representable):
//      nd = 254.0f / (hi - lo), zero = -127 - round(lo * nd), q = clamp(round(v * nd) + zero, -127, 127)
//      v ~= (q - zero) * scale, scale = (hi - lo) / 254.0f.
#pragma once

#include <cmath>
#include <cstdint>
#include <string_view>
#include <vector>

namespace tritium {

/// Int8 quantization methods (weight granularity + the activation quantization forward uses).
///  - kAbsmax:     W one absmax scale per tensor; x one absmax scale per tensor (per request).
///  - kZeropoint:  W asymmetric per tensor; x asymmetric per tensor (per request).
///  - kRowwise:    W one scale per output row; x one scale per tensor (per request).
///  - kVectorwise: W8A8: W one scale per output row; x one scale per token (row of x).
///  - kLlmInt8:    vector-wise + mixed-precision decomposition of outlier feature columns.
///  - kWeightOnly: W one scale per output row; x stays float32 (fp32 accumulation).
enum class Int8Method { kAbsmax, kZeropoint, kRowwise, kVectorwise, kLlmInt8, kWeightOnly };

/// "absmax", "zeropoint", "rowwise", "vectorwise", "llm.int8", "weight-only".
std::string_view int8_method_name(Int8Method m);
/// Parses the names above; throws tritium::Error otherwise.
Int8Method parse_int8_method(std::string_view s);

/// 127 / absmax as fp32 (0 when absmax == 0): the multiplier that maps [-absmax, absmax] to codes.
inline float absmax_inv_scale(float absmax) { return absmax > 0.0f ? 127.0f / absmax : 0.0f; }
/// absmax / 127 as fp32: the dequantization step of an absmax code.
inline float absmax_scale(float absmax) { return absmax / 127.0f; }
/// Rounds v * inv (exact product, round half to even) and clamps to [-127, 127].
inline int8_t quantize_s8(float v, float inv) {
  double r = std::nearbyint(static_cast<double>(v) * static_cast<double>(inv));
  r = r < -127.0 ? -127.0 : (r > 127.0 ? 127.0 : r);
  return static_cast<int8_t>(r);
}

/// Parameters of an asymmetric (zero-point) int8 code, see the file comment.
struct ZeroPointParams {
  float nd = 0.0f;     ///< codes per unit: 254 / (hi - lo)
  float scale = 0.0f;  ///< (hi - lo) / 254: dequantization step
  int32_t zero = 0;    ///< code of 0.0
};
/// Zero-point parameters for values in [lo, hi] (the range is first widened to include 0).
ZeroPointParams zeropoint_params(float lo, float hi);
/// clamp(round(v * nd) + zero, -127, 127), product exact in double, round half to even.
inline int8_t quantize_zeropoint_s8(float v, const ZeroPointParams& p) {
  double r = std::nearbyint(static_cast<double>(v) * static_cast<double>(p.nd)) + p.zero;
  r = r < -127.0 ? -127.0 : (r > 127.0 ? 127.0 : r);
  return static_cast<int8_t>(r);
}

/// Where LLM.int8() takes the 16-bit weights of outlier columns from.
///  - kFp16Copy:    an fp16 copy of all of W is kept (the paper's arithmetic: outlier columns use
///                  16-bit weights). Costs 2 extra bytes per weight: int8 + fp16 = 3 B/weight,
///                  i.e. 1.5x the memory of plain fp16 weights (the outlier set is only known per
///                  input, so every column may be needed).
///  - kInt8Dequant: the outlier columns' weights are the int8 codes times the row scale (what
///                  bitsandbytes does at inference): no extra memory, the outlier path keeps the
///                  activations in full precision but the weights carry int8 rounding error.
enum class OutlierWeights { kFp16Copy, kInt8Dequant };

/// A quantized weight matrix W [N, K] for one Int8Method.
struct Int8Weight {
  Int8Method method = Int8Method::kVectorwise;
  int64_t n = 0;  ///< output features (rows)
  int64_t k = 0;  ///< input features (columns)
  std::vector<int8_t> q;         ///< codes int8 [N, K] row-major, each in [-127, 127]
  std::vector<float> scale;      ///< [1] (kAbsmax, kZeropoint) or [N]: W[n,k] ~= (q - zero) * scale
  int32_t zero = 0;              ///< zero point (kZeropoint; 0 otherwise)
  std::vector<int32_t> row_sum;  ///< [N] sum_k q[n, k] (VNNI offset / zero-point corrections)
  std::vector<uint16_t> f16;     ///< kLlmInt8 + kFp16Copy: W as IEEE fp16 [N, K]; empty otherwise

  /// Scale of output row n (per-tensor methods return scale[0]).
  float row_scale(int64_t row) const { return scale.size() == 1 ? scale[0] : scale[row]; }
  /// Bytes held: codes + scales + row sums + fp16 copy.
  size_t bytes() const;
  /// Dequantized W [N, K] as float32 (for checks and error measurements).
  std::vector<float> dequantize() const;
};

/// Quantizes W float32 [N, K] (row-major, HF Linear.weight) with the given method.
/// kFp16Copy applies to kLlmInt8 only. Throws tritium::Error on n, k <= 0 or a non-finite weight.
Int8Weight quantize_int8_weight(Int8Method method, const float* w, int64_t n, int64_t k,
                                OutlierWeights outlier_weights = OutlierWeights::kFp16Copy);

}  // namespace tritium
