#include "engine/engine_metrics.h"

#include <algorithm>

namespace tritium {

Histogram::Histogram(std::vector<double> upper_bounds) : bounds_(std::move(upper_bounds)) {
  std::sort(bounds_.begin(), bounds_.end());
  counts_.assign(bounds_.size() + 1, 0);
}

void Histogram::observe(double v) {
  const size_t i = static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin());
  ++counts_[i];
  sum_ += v;
  ++count_;
}

uint64_t Histogram::cumulative(size_t i) const {
  uint64_t c = 0;
  for (size_t j = 0; j <= i && j < counts_.size(); ++j) c += counts_[j];
  return c;
}

}  // namespace tritium
