#include <gtest/gtest.h>

#include <cmath>

#include "core/dtype.h"

using namespace tritium;

TEST(DType, Bf16RoundTripExactOnRepresentable) {
  for (float v : {0.0f, 1.0f, -2.5f, 3.140625f, 1e-20f, -65504.0f}) {
    EXPECT_EQ(bf16_to_f32(f32_to_bf16(bf16_to_f32(f32_to_bf16(v)))), bf16_to_f32(f32_to_bf16(v)));
  }
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(bf16_to_f32(0xc040), -3.0f);
  // Round to nearest even: 1 + 2^-8 is halfway between 1 and 1 + 2^-7 -> rounds to 1.
  EXPECT_EQ(f32_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
}

TEST(DType, F16AllValuesRoundTrip) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    float f = f16_to_f32(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    EXPECT_EQ(f32_to_f16(f), h) << std::hex << h;
  }
  EXPECT_EQ(f16_to_f32(0x3c00), 1.0f);
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(f32_to_f16(1e6f), 0x7c00);
}

TEST(DType, ParseNames) {
  DType t;
  ASSERT_TRUE(parse_dtype("BF16", &t));
  EXPECT_EQ(t, DType::BF16);
  EXPECT_EQ(dtype_size(t), 2u);
  EXPECT_FALSE(parse_dtype("Q4_K", &t));
}
