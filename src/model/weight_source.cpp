#include "model/weight_source.h"

#include <algorithm>
#include <cmath>

namespace tritium {

TernaryWeight ternary_absmean_b158(const std::vector<float>& f) {
  double sum = 0.0;
  for (float v : f) sum += std::fabs(v);
  const float s = std::max(static_cast<float>(sum / static_cast<double>(f.size())), 1e-5f);
  TernaryWeight r;
  r.w.resize(f.size());
  for (size_t i = 0; i < f.size(); ++i)
    r.w[i] = static_cast<int8_t>(std::clamp(std::nearbyint(f[i] / s), -1.0f, 1.0f));
  r.scale = s;
  return r;
}

}  // namespace tritium
