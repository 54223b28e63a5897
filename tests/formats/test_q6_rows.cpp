// The q6 head format (formats/q6_rows.h): the documented byte layout, exact round trips of representable weights,
// the error of the scale search against absmax / 31 scales, and the errors it reports.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "formats/q6_rows.h"

using namespace tritium;

TEST(Q6Rows, ByteLayoutIsTheDocumentedOne) {
  // One row of 128 columns, scale 1 in every group: weight = code. Column c of block 1 gets code c % 64 - 31
  // (-31..31 then 32 is clamped to 31); block 0 is zero except column 0 = 31, which sets every group's absmax.
  const int64_t K = 128;
  std::vector<float> w(K, 0.0f);
  for (int64_t g = 0; g < K / 32; ++g) w[g * 32] = 31.0f;
  for (int64_t c = 1; c < 64; ++c) w[64 + c] = static_cast<float>(std::min<int64_t>(c - 31, 31));
  w[64] = 31.0f;
  const Q6Rows q = quantize_q6_rows(w.data(), 1, K);
  ASSERT_EQ(q.codes.size(), static_cast<size_t>(K / 4 * 3));
  ASSERT_EQ(q.scales.size(), static_cast<size_t>(K / 32));
  for (uint16_t s : q.scales) EXPECT_EQ(f16_to_f32(s), 1.0f);
  for (int64_t c = 0; c < K; ++c) {
    const int u = static_cast<int>(w[c]) + 32;
    const uint8_t* blk = q.codes.data() + (c / 64) * 48;
    const int64_t j = c % 64;
    const int lo = j < 32 ? (blk[j] & 15) : (blk[j - 32] >> 4);
    const int hi = (blk[32 + j % 16] >> (2 * (j / 16))) & 3;
    ASSERT_EQ(lo, u & 15) << c;
    ASSERT_EQ(hi, u >> 4) << c;
    ASSERT_EQ(q6_code(q.codes.data(), c), static_cast<int>(w[c])) << c;
  }
}

TEST(Q6Rows, RepresentableWeightsRoundTripExactly) {
  // w = q * s with s a power of two and one |q| = 31 per group: the fp16 scale is exactly s, the codes exactly q.
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> qd(-31, 31), ed(-14, 4);
  const int64_t N = 37, K = 384;
  std::vector<float> w(static_cast<size_t>(N * K));
  for (int64_t r = 0; r < N; ++r)
    for (int64_t g = 0; g < K / 32; ++g) {
      const float s = std::ldexp(1.0f, ed(rng));
      for (int64_t j = 0; j < 32; ++j) w[r * K + g * 32 + j] = static_cast<float>(qd(rng)) * s;
      w[r * K + g * 32 + (r + g) % 32] = (g % 2 ? -31.0f : 31.0f) * s;
    }
  const Q6Rows q = quantize_q6_rows(w.data(), N, K);
  EXPECT_EQ(q.bytes(), static_cast<size_t>(N * K * 3 / 4 + N * K / 32 * 2));
  EXPECT_EQ(q.dequantize(), w);
}

TEST(Q6Rows, ErrorNoWorseThanAbsmaxScalesAndZeroGroups) {
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.0f, 0.05f);
  const int64_t N = 64, K = 256;
  std::vector<float> w(static_cast<size_t>(N * K));
  for (auto& v : w) v = nd(rng);
  w[7] = 1.5f;                                                      // an outlier inside one group
  std::fill(w.begin() + 3 * K + 64, w.begin() + 3 * K + 96, 0.0f);  // an all-zero group
  const Q6Rows q = quantize_q6_rows(w.data(), N, K);
  EXPECT_EQ(q.scales[3 * (K / 32) + 2], 0);
  const std::vector<float> d = q.dequantize();
  double total = 0, total_absmax = 0;
  int better = 0;
  for (int64_t r = 0; r < N; ++r)
    for (int64_t g = 0; g < K / 32; ++g) {
      const float* wg = w.data() + r * K + g * 32;
      const float* dg = d.data() + r * K + g * 32;
      float amax = 0;
      for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(wg[j]));
      // The plain absmax / 31 scale, for comparison.
      const float s0 = f16_to_f32(f32_to_f16(amax / 31.0f));
      double e = 0, e0 = 0;
      for (int j = 0; j < 32; ++j) {
        const float c0 = s0 > 0 ? std::clamp(std::nearbyint(wg[j] / s0), -31.0f, 31.0f) : 0.0f;
        e0 += (wg[j] - s0 * c0) * (wg[j] - s0 * c0);
        e += (wg[j] - dg[j]) * (wg[j] - dg[j]);
        ASSERT_LE(std::fabs(dg[j] - wg[j]), amax / 31.0f) << r << "," << g * 32 + j;
        const int c = q6_code(q.codes.data() + r * q.row_bytes(), g * 32 + j);
        ASSERT_GE(c, -31);
        ASSERT_LE(c, 31);
      }
      ASSERT_LE(e, e0 * (1 + 1e-5) + 1e-12) << r << "," << g;
      better += e < e0 * 0.999;
      total += e;
      total_absmax += e0;
    }
  // The scale search pays: most groups, and the whole matrix, code with less error than absmax / 31 gives.
  EXPECT_GT(better, N * K / 32 / 2);
  EXPECT_LT(total, 0.95 * total_absmax);
}

TEST(Q6Rows, RejectsBadShapesValuesAndBuffers) {
  std::vector<float> w(64 * 3, 0.5f);
  EXPECT_THROW(quantize_q6_rows(w.data(), 3, 32), Error);
  EXPECT_THROW(quantize_q6_rows(w.data(), 0, 64), Error);
  w[70] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_THROW(quantize_q6_rows(w.data(), 3, 64), Error);
  w[70] = 1e8f;  // absmax / 31 beyond fp16
  EXPECT_THROW(quantize_q6_rows(w.data(), 3, 64), Error);
  w[70] = 0.5f;
  Q6Rows q = quantize_q6_rows(w.data(), 3, 64);
  EXPECT_NO_THROW(validate_q6_rows(q, "t"));
  q.codes.pop_back();
  EXPECT_THROW(validate_q6_rows(q, "t"), Error);
  q = quantize_q6_rows(w.data(), 3, 64);
  q.scales.push_back(0);
  EXPECT_THROW(validate_q6_rows(q, "t"), Error);
  q = quantize_q6_rows(w.data(), 3, 64);
  q.k = 96;
  EXPECT_THROW(validate_q6_rows(q, "t"), Error);
}
