// Outlier statistics: the paper's 25% layers / 6% positions rule, counts, histograms, and the
// suggested alpha, on synthetic activations with planted outlier features.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "eval/outlier_stats.h"

using namespace tritium;

namespace {
std::vector<float> background(int64_t T, int64_t K, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(T * K));
  for (auto& v : x) v = u(rng);
  return x;
}
}  // namespace

TEST(OutlierStats, PaperRuleOnPlantedFeatures) {
  std::mt19937 rng(17);
  const int64_t T = 100, K = 64, K2 = 128;
  OutlierCollector col;  // alpha 6, 25% of layers, 6% of positions
  col.begin_text();
  for (int l = 0; l < 8; ++l) {
    auto x = background(T, K, rng);
    if (l < 3)
      for (int t = 0; t < 10; ++t) x[t * K + 5] = (t % 2) ? 20.0f : -20.0f;  // 3/8 layers, 10% positions
    if (l == 4)
      for (int t = 0; t < T; ++t) x[t * K + 9] = 20.0f;  // 1/8 layers: too few layers
    for (int t = 0; t < 3; ++t) x[t * K + 20] = 20.0f;   // all layers, 3% positions: too few
    if (l == 6)
      for (int t = 0; t < 3; ++t) x[t * K + 30] = 6.0f;  // 2/8 layers (= 25%), positions 0-2 ...
    if (l == 7)
      for (int t = 3; t < 6; ++t) x[t * K + 30] = -6.0f;  // ... and 3-5: union = 6% exactly
    col.add(fmt::format("layers.{}.in", l), x.data(), T, K);
  }
  for (int l = 0; l < 2; ++l) {  // width-128 inputs (down projections): column 5 means nothing there
    auto x = background(T, K2, rng);
    col.add(fmt::format("layers.{}.down", l), x.data(), T, K2);
  }
  const OutlierReport r = col.report();
  EXPECT_EQ(r.positions, T);
  ASSERT_EQ(r.layers.size(), 10u);
  ASSERT_EQ(r.features.size(), 2u);
  EXPECT_EQ(r.features[0].k, K);
  EXPECT_EQ(r.features[0].column, 5);
  EXPECT_DOUBLE_EQ(r.features[0].layer_fraction, 3.0 / 8.0);
  EXPECT_DOUBLE_EQ(r.features[0].position_fraction, 0.10);
  EXPECT_FLOAT_EQ(r.features[0].max_abs, 20.0f);
  EXPECT_EQ(r.features[1].column, 30);
  EXPECT_DOUBLE_EQ(r.features[1].layer_fraction, 0.25);
  EXPECT_DOUBLE_EQ(r.features[1].position_fraction, 0.06);

  // Per-layer counts.
  const LayerOutlierStats& l0 = r.layers[0];
  EXPECT_EQ(l0.name, "layers.0.in");
  EXPECT_EQ(l0.tokens, T);
  EXPECT_EQ(l0.outlier_values, 10 + 3);  // column 5 x 10 tokens, column 20 x 3 tokens
  EXPECT_EQ(l0.outlier_columns, 2);
  EXPECT_EQ(l0.col_count[5], 10);
  EXPECT_FLOAT_EQ(l0.col_max[5], 20.0f);
  EXPECT_EQ(r.layers[4].outlier_values, T + 3);
  EXPECT_EQ(r.layers[8].outlier_values, 0);
  // Histogram: 64 columns; the two at 20 sit in bin [16, 32); the rest below 1.
  const auto& edges = OutlierCollector::histogram_edges();
  int64_t total = 0;
  for (int64_t c : l0.histogram) total += c;
  EXPECT_EQ(total, K);
  const size_t bin16 = static_cast<size_t>(std::find(edges.begin(), edges.end(), 16.0f) - edges.begin());
  EXPECT_EQ(l0.histogram[bin16], 2);

  // Suggested alpha: the break between the planted 20s (and 6s) and the uniform background (< 1).
  ASSERT_TRUE(r.alpha_from_break);
  EXPECT_FLOAT_EQ(r.break_above, 6.0f);
  EXPECT_LT(r.break_below, 1.0f);
  EXPECT_GT(r.break_below, 0.9f);
  EXPECT_NEAR(r.suggested_alpha, std::sqrt(6.0 * r.break_below), 1e-5);
}

TEST(OutlierStats, PositionsAccumulateOverTextsAndNoBreakFallsBack) {
  std::mt19937 rng(5);
  OutlierCollector col(OutlierRule{4.0f, 0.5, 0.5});
  for (int64_t T : {30, 20}) {
    col.begin_text();
    for (int l = 0; l < 2; ++l) {
      auto x = background(T, 16, rng);
      if (T == 20)
        for (int t = 0; t < T; ++t) x[t * 16 + 2] = 5.0f;  // every position of text 2 only: 20/50
      col.add(fmt::format("l{}", l), x.data(), T, 16);
    }
  }
  OutlierReport r = col.report();
  EXPECT_EQ(r.positions, 50);
  EXPECT_TRUE(r.features.empty());  // 40% of positions < 50%
  EXPECT_EQ(r.layers[0].tokens, 50);
  // No planted values at all: the sorted maxima have no factor-2 break -> rule alpha.
  OutlierCollector plain;
  auto x = background(64, 32, rng);
  plain.add("a", x.data(), 64, 32);
  const OutlierReport p = plain.report();
  EXPECT_FALSE(p.alpha_from_break);
  EXPECT_EQ(p.suggested_alpha, 6.0f);
  EXPECT_EQ(p.positions, 64);
  // Errors.
  EXPECT_THROW(plain.add("a", x.data(), 2, 16), Error);  // width change
  x[0] = NAN;
  EXPECT_THROW(plain.add("b", x.data(), 2, 16), Error);
  EXPECT_THROW(OutlierCollector(OutlierRule{0.0f, 0.25, 0.06}), Error);
}
