#include "quant/ternary_detect.h"

#include <cmath>
#include <utility>

#include "core/error.h"

namespace tritium {

std::optional<TernaryQuant> detect_ternary(const float* w, int64_t n, int64_t k, int64_t group) {
  TRITIUM_CHECK(n > 0 && k > 0 && group > 0, "detect_ternary: bad shape {} x {} (group {})", n, k, group);
  const int64_t G = (k + group - 1) / group;
  TernaryQuant t;
  t.n = n;
  t.k = k;
  t.group_size = group;
  t.scales.assign(static_cast<size_t>(n * G), 0.0f);
  t.q.resize(static_cast<size_t>(n * k));
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t g = 0; g < G; ++g) {
      float mag = 0.0f;
      const int64_t c1 = std::min(k, (g + 1) * group);
      for (int64_t c = g * group; c < c1; ++c) {
        const float v = w[r * k + c];
        int8_t q = 0;
        if (v != 0.0f) {
          if (!std::isfinite(v)) return std::nullopt;
          const float a = std::fabs(v);
          if (mag == 0.0f) mag = a;
          else if (a != mag) return std::nullopt;
          q = v > 0 ? 1 : -1;
        }
        t.q[static_cast<size_t>(r * k + c)] = q;
      }
      t.scales[static_cast<size_t>(r * G + g)] = mag;
    }
  }
  return settle_group_scales(std::move(t));
}

std::optional<TernaryQuant> settle_group_scales(TernaryQuant q) {
  float tensor_mag = 0.0f;
  bool uniform = true;
  for (const float mag : q.scales) {
    if (mag == 0.0f) continue;
    if (tensor_mag == 0.0f) tensor_mag = mag;
    else if (mag != tensor_mag) uniform = false;
  }
  if (tensor_mag == 0.0f) return std::nullopt;
  if (uniform) {
    q.group_size = 0;
    q.scales.assign(1, tensor_mag);
  }
  return q;
}

}  // namespace tritium
