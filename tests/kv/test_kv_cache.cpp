// The KV cache's element conversions and host pools.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "kv/fp8.h"
#include "kv/kv_cache.h"

using namespace tritium;

// Every finite e4m3 code decodes and encodes back to itself; zeros keep their sign; values between two codes round
// to the nearer (ties to the even code); magnitudes past 448 saturate; NaN stays NaN.
TEST(Fp8E4M3, RoundTripRoundingAndSaturation) {
  for (int b = 0; b < 256; ++b) {
    const float v = fp8_e4m3_to_f32(static_cast<uint8_t>(b));
    if ((b & 0x7f) == 0x7f) {
      EXPECT_TRUE(std::isnan(v)) << b;
      continue;
    }
    EXPECT_EQ(f32_to_fp8_e4m3(v), b) << "code " << b << " value " << v;
  }
  EXPECT_EQ(f32_to_fp8_e4m3(0.0f), 0x00);
  EXPECT_EQ(f32_to_fp8_e4m3(-0.0f), 0x80);
  EXPECT_EQ(f32_to_fp8_e4m3(1e-30f), 0x00);  // below half the smallest subnormal (2^-10)
  EXPECT_EQ(f32_to_fp8_e4m3(1000.0f), 0x7e);
  EXPECT_EQ(f32_to_fp8_e4m3(-1e30f), 0xfe);
  EXPECT_EQ(f32_to_fp8_e4m3(NAN), 0x7f);
  // 1.0 = 0x38, next code 1.125 = 0x39: 1.0625 is a tie and goes to the even code, 1.07 up, 1.05 down.
  EXPECT_EQ(f32_to_fp8_e4m3(1.0625f), 0x38);
  EXPECT_EQ(f32_to_fp8_e4m3(1.07f), 0x39);
  EXPECT_EQ(f32_to_fp8_e4m3(1.05f), 0x38);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> d(-500.0f, 500.0f);
  for (int i = 0; i < 100000; ++i) {  // the nearest code, by search
    const float x = d(rng);
    const float got = fp8_e4m3_to_f32(f32_to_fp8_e4m3(x));
    const float xc = std::clamp(x, -448.0f, 448.0f);
    float best = 0;
    for (int b = 0; b < 256; ++b) {
      const float v = fp8_e4m3_to_f32(static_cast<uint8_t>(b));
      if (!std::isnan(v) && std::fabs(v - xc) < std::fabs(best - xc)) best = v;
    }
    ASSERT_EQ(std::fabs(got - x), std::fabs(best - x)) << x;
  }
}

// The host pools are allocated at the first write: before it every position reads as zeros; written rows read
// back through the dtype (fp8 with its scale), and other rows stay zero.
TEST(KvCache, LazyHostPoolsAndFp8Scale) {
  KvCacheSpec spec{2, 2, 8, 4, 3, KvDType::kFP8E4M3};
  spec.quant_scale = 0.5f;
  KvCache cache(spec);
  EXPECT_EQ(cache.bytes(), spec.bytes_per_token() * 4 * 3);
  const std::vector<int32_t> table = {2, 0};
  std::vector<float> k(16 * 5, 1.0f), v(k.size(), 1.0f);
  cache.gather(1, table.data(), 5, k.data(), v.data());
  for (float x : k) ASSERT_EQ(x, 0.0f);
  std::vector<float> kr(16), vr(16);
  for (int i = 0; i < 16; ++i) kr[i] = 0.3f * i - 2.0f, vr[i] = -0.7f * i;
  cache.write(1, table.data(), 4, kr.data(), vr.data());  // position 4: block 0, slot 0
  cache.gather(1, table.data(), 5, k.data(), v.data());
  for (int i = 0; i < 16; ++i) {
    EXPECT_EQ(k[4 * 16 + i], fp8_e4m3_to_f32(f32_to_fp8_e4m3(kr[i] / 0.5f)) * 0.5f) << i;
    EXPECT_EQ(v[4 * 16 + i], fp8_e4m3_to_f32(f32_to_fp8_e4m3(vr[i] / 0.5f)) * 0.5f) << i;
  }
  for (int i = 0; i < 4 * 16; ++i) ASSERT_EQ(k[i], 0.0f);
}
