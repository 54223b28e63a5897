// Ternary post-training quantization rules on hand-computable matrices, and the least-squares
// scale / optimal threshold against brute-force searches.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "core/error.h"
#include "quant/ternary_ptq.h"
#include "formats/ternary_format.h"

using namespace tritium;

TEST(TernaryPtq, AbsmeanPerTensorByHand) {
  // mean |W| = 4.75 / 8 = 0.59375; W / s = .84 -1.68 .17 3.37 | 0 -.51 .42 -1.01
  const float w[8] = {0.5f, -1.0f, 0.1f, 2.0f, 0.0f, -0.3f, 0.25f, -0.6f};
  TernaryQuant t = ternary_absmean(w, 2, 4);
  EXPECT_EQ(t.q, std::vector<int8_t>({1, -1, 0, 1, 0, -1, 0, -1}));
  ASSERT_EQ(t.scales.size(), 1u);
  EXPECT_FLOAT_EQ(t.scales[0], 0.59375f);
  EXPECT_EQ(t.group_size, 0);
  // Exactly half a step rounds to even (0), like torch.round: W = [1.5, 0.5] -> s = 1.
  const float h[2] = {1.5f, 0.5f};
  EXPECT_EQ(ternary_absmean(h, 1, 2).q, std::vector<int8_t>({1, 0}));
  // All zero: scale 0, codes 0.
  const float z[3] = {0, 0, 0};
  TernaryQuant tz = ternary_absmean(z, 1, 3);
  EXPECT_EQ(tz.q, std::vector<int8_t>({0, 0, 0}));
  EXPECT_EQ(tz.scales[0], 0.0f);
}

TEST(TernaryPtq, AbsmeanGroupedByHand) {
  // K = 130 with groups of 128: two groups per row, the second has 2 columns.
  const int64_t K = 130;
  std::vector<float> w(2 * K, 0.0f);
  for (int64_t c = 0; c < 128; ++c) w[c] = (c % 2) ? 0.25f : -0.25f;  // mean 0.25 -> codes +-1
  w[128] = 4.0f;                                                         // group mean 2.25: 1.78 -> 1
  w[129] = -0.5f;                                                        // -0.22 -> 0
  w[K + 5] = 0.6f;                                                       // row 1 group 0 mean 0.6/128
  TernaryQuant t = ternary_absmean_grouped(w.data(), 2, K, 128);
  ASSERT_EQ(t.groups_per_row(), 2);
  ASSERT_EQ(t.scales.size(), 4u);
  EXPECT_FLOAT_EQ(t.scales[0], 0.25f);
  EXPECT_FLOAT_EQ(t.scales[1], 2.25f);
  EXPECT_FLOAT_EQ(t.scales[2], 0.6f / 128.0f);
  EXPECT_EQ(t.scales[3], 0.0f);
  EXPECT_EQ(t.q[0], -1);
  EXPECT_EQ(t.q[1], 1);
  EXPECT_EQ(t.q[128], 1);
  EXPECT_EQ(t.q[129], 0);
  EXPECT_EQ(t.q[K + 5], 1);
  EXPECT_EQ(t.q[K + 6], 0);
  EXPECT_FLOAT_EQ(t.scale_at(0, 129), 2.25f);
  const auto d = t.dequantize();
  EXPECT_FLOAT_EQ(d[128], 2.25f);
  EXPECT_FLOAT_EQ(d[1], 0.25f);
  EXPECT_THROW(ternary_absmean_grouped(w.data(), 2, K, 0), Error);
}

TEST(TernaryPtq, ThresholdRuleAndLeastSquaresScaleByHand) {
  const float w[5] = {0.9f, -0.2f, 0.05f, -1.1f, 0.4f};
  TernaryQuant t = ternary_threshold(w, 1, 5, 0.3f);
  EXPECT_EQ(t.q, std::vector<int8_t>({1, 0, 0, -1, 1}));
  EXPECT_FLOAT_EQ(t.scales[0], 0.8f);  // (0.9 + 1.1 + 0.4) / 3
  // |w| == t is dropped (strict >).
  EXPECT_EQ(ternary_threshold(w, 1, 5, 0.4f).q, std::vector<int8_t>({1, 0, 0, -1, 0}));
  // Nothing kept: scale 0.
  EXPECT_EQ(ternary_threshold(w, 1, 5, 5.0f).scales[0], 0.0f);
  EXPECT_FLOAT_EQ(ternary_twn_threshold(w, 5), 0.7f * 2.65f / 5.0f);
  EXPECT_THROW(ternary_threshold(w, 1, 5, -1.0f), Error);
}

namespace {
double sq_err(const std::vector<float>& w, float t, double alpha) {
  double e = 0;
  for (float v : w) {
    const double q = std::fabs(v) > t ? (v > 0 ? 1.0 : -1.0) : 0.0;
    e += (v - alpha * q) * (v - alpha * q);
  }
  return e;
}
}  // namespace

TEST(TernaryPtq, LeastSquaresScaleBeatsBruteForceSearch) {
  std::mt19937 rng(8);
  std::normal_distribution<float> g(0.0f, 0.05f);
  std::vector<float> w(999);
  for (auto& v : w) v = g(rng);
  for (float t : {0.0f, 0.01f, 0.035f, 0.08f}) {
    const float alpha = ternary_ls_scale(w.data(), static_cast<int64_t>(w.size()), t);
    const double e_ls = sq_err(w, t, alpha);
    double best_e = 1e300, best_a = 0;
    for (int i = 0; i <= 20000; ++i) {  // alpha in [0, 0.2] step 1e-5
      const double a = i * 1e-5;
      const double e = sq_err(w, t, a);
      if (e < best_e) {
        best_e = e;
        best_a = a;
      }
    }
    EXPECT_LE(e_ls, best_e * (1 + 1e-9)) << "t=" << t;
    EXPECT_NEAR(alpha, best_a, 1e-5) << "t=" << t;
  }
  // The optimal threshold: no threshold on a fine grid gives a smaller least-squares error.
  const float t_opt = ternary_optimal_threshold(w.data(), static_cast<int64_t>(w.size()));
  const double e_opt = sq_err(w, t_opt, ternary_ls_scale(w.data(), static_cast<int64_t>(w.size()), t_opt));
  for (int i = 0; i <= 2000; ++i) {
    const float t = i * 1e-4f;
    EXPECT_LE(e_opt, sq_err(w, t, ternary_ls_scale(w.data(), static_cast<int64_t>(w.size()), t)) * (1 + 1e-9)) << t;
  }
  // For a Gaussian the optimum keeps roughly |w| > 0.6 sigma (TWN's 0.7 * mean|w| ~ 0.56 sigma).
  EXPECT_GT(t_opt, 0.02f);
  EXPECT_LT(t_opt, 0.04f);
}

TEST(TernaryPtq, CodesPackIntoTernaryFormat) {
  std::mt19937 rng(4);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> w(7 * 300);
  for (auto& v : w) v = g(rng);
  TernaryQuant t = ternary_absmean_grouped(w.data(), 7, 300);
  auto packed = pack_ternary(TernaryFormat::kInt8, t.q.data(), 7, 300);
  std::vector<int8_t> back(t.q.size());
  packed->unpack(back.data());
  EXPECT_EQ(back, t.q);
}
