#include "quant/int8_quant.h"

#include <algorithm>

#include "core/dtype.h"
#include "core/error.h"
#include "kernels/cpu/int8_gemm.h"

namespace tritium {

std::string_view int8_method_name(Int8Method m) {
  switch (m) {
    case Int8Method::kAbsmax: return "absmax";
    case Int8Method::kZeropoint: return "zeropoint";
    case Int8Method::kRowwise: return "rowwise";
    case Int8Method::kVectorwise: return "vectorwise";
    case Int8Method::kLlmInt8: return "llm.int8";
    case Int8Method::kWeightOnly: return "weight-only";
  }
  return "?";
}

Int8Method parse_int8_method(std::string_view s) {
  for (Int8Method m : {Int8Method::kAbsmax, Int8Method::kZeropoint, Int8Method::kRowwise,
                       Int8Method::kVectorwise, Int8Method::kLlmInt8, Int8Method::kWeightOnly}) {
    if (int8_method_name(m) == s) return m;
  }
  fail("unknown int8 method '{}' (expected absmax, zeropoint, rowwise, vectorwise, llm.int8 or weight-only)", s);
}

ZeroPointParams zeropoint_params(float lo, float hi) {
  lo = std::min(lo, 0.0f);
  hi = std::max(hi, 0.0f);
  ZeroPointParams p;
  if (!(hi > lo)) return p;  // all zeros: every code is 0, scale 0
  p.nd = 254.0f / (hi - lo);
  p.scale = (hi - lo) / 254.0f;
  p.zero = -127 - static_cast<int32_t>(std::nearbyint(static_cast<double>(lo) * static_cast<double>(p.nd)));
  return p;
}

size_t Int8Weight::bytes() const {
  return q.size() + scale.size() * sizeof(float) + row_sum.size() * sizeof(int32_t) + f16.size() * 2;
}

std::vector<float> Int8Weight::dequantize() const {
  std::vector<float> out(static_cast<size_t>(n * k));
  for (int64_t r = 0; r < n; ++r) {
    const float s = row_scale(r);
    for (int64_t c = 0; c < k; ++c) out[r * k + c] = static_cast<float>(q[r * k + c] - zero) * s;
  }
  return out;
}

Int8Weight quantize_int8_weight(Int8Method method, const float* w, int64_t n, int64_t k,
                                OutlierWeights outlier_weights) {
  TRITIUM_CHECK(n > 0 && k > 0, "quantize_int8_weight: bad shape [{}, {}]", n, k);
  TRITIUM_CHECK(k <= kInt8GemmMaxK, "quantize_int8_weight: K={} exceeds {}", k, kInt8GemmMaxK);
  const int64_t total = n * k;
  for (int64_t i = 0; i < total; ++i) {
    TRITIUM_CHECK(std::isfinite(w[i]), "quantize_int8_weight: weight {} (row {}, col {}) is not finite",
                  w[i], i / k, i % k);
  }
  Int8Weight out;
  out.method = method;
  out.n = n;
  out.k = k;
  out.q.resize(static_cast<size_t>(total));
  switch (method) {
    case Int8Method::kAbsmax: {
      float amax = 0.0f;
      for (int64_t i = 0; i < total; ++i) amax = std::max(amax, std::fabs(w[i]));
      const float inv = absmax_inv_scale(amax);
      for (int64_t i = 0; i < total; ++i) out.q[i] = quantize_s8(w[i], inv);
      out.scale = {absmax_scale(amax)};
      break;
    }
    case Int8Method::kZeropoint: {
      float lo = w[0], hi = w[0];
      for (int64_t i = 0; i < total; ++i) {
        lo = std::min(lo, w[i]);
        hi = std::max(hi, w[i]);
      }
      const ZeroPointParams p = zeropoint_params(lo, hi);
      for (int64_t i = 0; i < total; ++i) out.q[i] = quantize_zeropoint_s8(w[i], p);
      out.scale = {p.scale};
      out.zero = p.zero;
      break;
    }
    case Int8Method::kRowwise:
    case Int8Method::kVectorwise:
    case Int8Method::kLlmInt8:
    case Int8Method::kWeightOnly: {
      out.scale.resize(static_cast<size_t>(n));
      for (int64_t r = 0; r < n; ++r) {
        const float* wr = w + r * k;
        float amax = 0.0f;
        for (int64_t c = 0; c < k; ++c) amax = std::max(amax, std::fabs(wr[c]));
        const float inv = absmax_inv_scale(amax);
        for (int64_t c = 0; c < k; ++c) out.q[r * k + c] = quantize_s8(wr[c], inv);
        out.scale[r] = absmax_scale(amax);
      }
      break;
    }
  }
  out.row_sum.resize(static_cast<size_t>(n));
  int8_row_sums(out.q.data(), n, k, out.row_sum.data());
  if (method == Int8Method::kLlmInt8 && outlier_weights == OutlierWeights::kFp16Copy) {
    out.f16.resize(static_cast<size_t>(total));
    for (int64_t i = 0; i < total; ++i) out.f16[i] = f32_to_f16(w[i]);
  }
  return out;
}

}  // namespace tritium
