#include "eval/outlier_stats.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include "core/error.h"

namespace tritium {

OutlierCollector::OutlierCollector(OutlierRule rule) : rule_(rule) {
  TRITIUM_CHECK(rule_.alpha > 0 && std::isfinite(rule_.alpha), "OutlierCollector: alpha {} must be positive", rule_.alpha);
  TRITIUM_CHECK(rule_.min_layer_fraction >= 0 && rule_.min_layer_fraction <= 1 && rule_.min_position_fraction >= 0 &&
                    rule_.min_position_fraction <= 1,
                "OutlierCollector: fractions must lie in [0, 1]");
}

const std::vector<float>& OutlierCollector::histogram_edges() {
  static const std::vector<float> edges = [] {
    std::vector<float> e = {0.0f};
    for (int p = -4; p <= 10; ++p) e.push_back(std::ldexp(1.0f, p));
    return e;
  }();
  return edges;
}

void OutlierCollector::begin_text() {
  if (in_text_) text_offset_ += text_len_;
  text_len_ = 0;
  in_text_ = true;
}

void OutlierCollector::add(std::string_view layer, const float* x, int64_t T, int64_t K) {
  TRITIUM_CHECK(T >= 0 && K > 0, "OutlierCollector::add: bad shape [{}, {}] for layer '{}'", T, K, layer);
  if (!in_text_) begin_text();
  auto it = layer_index_.find(layer);
  size_t id;
  if (it == layer_index_.end()) {
    id = layers_.size();
    layer_index_.emplace(std::string(layer), id);
    LayerOutlierStats s;
    s.name = std::string(layer);
    s.k = K;
    s.col_max.assign(static_cast<size_t>(K), 0.0f);
    s.col_count.assign(static_cast<size_t>(K), 0);
    layers_.push_back(std::move(s));
  } else {
    id = it->second;
  }
  LayerOutlierStats& L = layers_[id];
  TRITIUM_CHECK(L.k == K, "OutlierCollector::add: layer '{}' had width {}, now {}", layer, L.k, K);
  text_len_ = std::max(text_len_, T);
  const float alpha = rule_.alpha;
  for (int64_t t = 0; t < T; ++t) {
    const float* xr = x + t * K;
    for (int64_t c = 0; c < K; ++c) {
      const float a = std::fabs(xr[c]);
      TRITIUM_CHECK(std::isfinite(a), "OutlierCollector::add: layer '{}' x[{}, {}] is not finite", layer, t, c);
      if (a > L.col_max[c]) L.col_max[c] = a;
      if (a >= alpha) {
        ++L.col_count[c];
        ++L.outlier_values;
        Feature& f = features_[{K, static_cast<int32_t>(c)}];
        if (f.layers.size() <= id) f.layers.resize(id + 1, false);
        f.layers[id] = true;
        const size_t pos = static_cast<size_t>(text_offset_ + t);
        if (f.positions.size() <= pos) f.positions.resize(pos + 1, false);
        f.positions[pos] = true;
        f.max_abs = std::max(f.max_abs, a);
      }
    }
  }
  L.tokens += T;
}

OutlierReport OutlierCollector::report() const {
  OutlierReport r;
  r.rule = rule_;
  r.layers = layers_;
  r.positions = text_offset_ + (in_text_ ? text_len_ : 0);
  const auto& edges = histogram_edges();
  for (LayerOutlierStats& L : r.layers) {
    L.histogram.assign(edges.size(), 0);
    L.outlier_columns = 0;
    for (float m : L.col_max) {
      const size_t bin = static_cast<size_t>(std::upper_bound(edges.begin(), edges.end(), m) - edges.begin()) - 1;
      ++L.histogram[bin];
      if (m >= rule_.alpha) ++L.outlier_columns;
    }
  }
  // The rule, per width.
  std::map<int64_t, int64_t> layers_of_width;
  for (const auto& L : layers_) ++layers_of_width[L.k];
  for (const auto& [key, f] : features_) {
    const int64_t nl = layers_of_width[key.first];
    const int64_t hit_layers = std::count(f.layers.begin(), f.layers.end(), true);
    const int64_t hit_pos = std::count(f.positions.begin(), f.positions.end(), true);
    const double lf = static_cast<double>(hit_layers) / static_cast<double>(nl);
    const double pf = r.positions > 0 ? static_cast<double>(hit_pos) / static_cast<double>(r.positions) : 0.0;
    if (lf >= rule_.min_layer_fraction && pf >= rule_.min_position_fraction)
      r.features.push_back({key.first, key.second, lf, pf, f.max_abs});
  }
  // Natural break in the sorted per-column max |x|.
  std::vector<float> all;
  for (const auto& L : layers_) all.insert(all.end(), L.col_max.begin(), L.col_max.end());
  std::sort(all.begin(), all.end(), std::greater<float>());
  r.suggested_alpha = rule_.alpha;
  if (all.size() >= 2) {
    const size_t top = std::max<size_t>(1, all.size() / 20);
    double best = 0;
    for (size_t i = 0; i < top && i + 1 < all.size(); ++i) {
      if (all[i + 1] <= 0) break;
      const double ratio = static_cast<double>(all[i]) / all[i + 1];
      if (ratio > best) {
        best = ratio;
        r.break_above = all[i];
        r.break_below = all[i + 1];
      }
    }
    if (best >= 2.0) {
      r.alpha_from_break = true;
      r.suggested_alpha = static_cast<float>(std::sqrt(static_cast<double>(r.break_above) * r.break_below));
    }
  }
  return r;
}

}  // namespace tritium
