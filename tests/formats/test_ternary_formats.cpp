#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "core/error.h"
#include "formats/ternary_bitcos.h"
#include "formats/ternary_format.h"
#include "formats/ternary_i2.h"
#include "formats/ternary_stats.h"
#include "formats/ternary_tq1.h"
#include "kernels/cpu/ternary_kernels.h"
#include "test_util.h"

using namespace tritium;

namespace {

using test::random_ternary;

const TernaryFormat kAllFormats[] = {TernaryFormat::kInt8, TernaryFormat::kI2, TernaryFormat::kTQ1,
                                     TernaryFormat::kBitcos};

struct Shape {
  int64_t n, k;
};
const Shape kShapes[] = {{1, 1}, {3, 100}, {16, 128}, {17, 129}, {37, 2597}, {64, 256}, {5, 383}};

}  // namespace

TEST(TernaryFormats, NamesRoundTrip) {
  for (TernaryFormat f : kAllFormats) EXPECT_EQ(parse_ternary_format(ternary_format_name(f)), f);
  EXPECT_THROW(parse_ternary_format("tq2"), Error);
}

TEST(TernaryFormats, PackUnpackExactEveryFormatAndDensity) {
  std::mt19937 rng(7);
  for (const Shape& s : kShapes) {
    for (double z : {0.0, 1.0, 0.356, std::uniform_real_distribution<double>(0, 1)(rng)}) {
      const auto w = random_ternary(s.n, s.k, z, static_cast<uint32_t>(s.n * 1000 + s.k));
      for (TernaryFormat f : kAllFormats) {
        auto p = pack_ternary(f, w.data(), s.n, s.k);
        ASSERT_EQ(p->format(), f);
        ASSERT_EQ(p->rows(), s.n);
        ASSERT_EQ(p->cols(), s.k);
        std::vector<int8_t> back(w.size(), 42);
        p->unpack(back.data());
        ASSERT_EQ(back, w) << ternary_format_name(f) << " [" << s.n << ", " << s.k << "] z=" << z;
      }
    }
  }
}

TEST(TernaryFormats, Tq1DigitTrickDecodesEveryByte) {
  // The SIMD decoder reads trit q of the stored byte as ((byte * 3^q) mod 256) * 3 >> 8.
  for (int v = 0; v < 243; ++v) {
    const int byte = (v * 256 + 242) / 243;
    ASSERT_LE(byte, 255);
    int digits[5], x = v;
    for (int q = 4; q >= 0; --q) digits[q] = x % 3, x /= 3;
    int pow3 = 1;
    for (int q = 0; q < 5; ++q, pow3 *= 3) {
      EXPECT_EQ((((byte * pow3) & 255) * 3) >> 8, digits[q]) << "v=" << v << " q=" << q;
    }
  }
}

TEST(TernaryFormats, ExactBytesAndBitsPerWeight) {
  const int64_t n = 2560, k = 2560;
  const auto w = random_ternary(n, k, 0.42, 3);
  auto i2 = pack_ternary(TernaryFormat::kI2, w.data(), n, k);
  auto tq1 = pack_ternary(TernaryFormat::kTQ1, w.data(), n, k);
  auto bc = pack_ternary(TernaryFormat::kBitcos, w.data(), n, k);
  EXPECT_EQ(i2->bytes(), static_cast<size_t>(n * k / 4));
  EXPECT_EQ(tq1->bytes() * 8 * 1000 / static_cast<size_t>(n * k), 1625u);  // 1.625 bits/weight
  uint64_t nnz = 0;
  for (int8_t v : w) nnz += v != 0;
  EXPECT_EQ(static_cast<const TernaryBitcos&>(*bc).nonzeros(), nnz);
  EXPECT_EQ(bc->bytes(), n * k / 8 + 8 * (nnz / 64 + 2) + 8 * (n / 16 + 1));

  const TernaryTensorStats st = ternary_tensor_stats(w.data(), n, k);
  EXPECT_EQ(st.count, static_cast<uint64_t>(n * k));
  EXPECT_EQ(st.zeros + st.positives + st.negatives, st.count);
  EXPECT_EQ(st.count - st.zeros, nnz);
  EXPECT_NEAR(st.zero_density, 0.42, 0.005);
  EXPECT_EQ(st.get(TernaryFormat::kI2).bytes, i2->bytes());
  EXPECT_EQ(st.get(TernaryFormat::kTQ1).bytes, tq1->bytes());
  EXPECT_EQ(st.get(TernaryFormat::kBitcos).bytes, bc->bytes());
  EXPECT_DOUBLE_EQ(st.get(TernaryFormat::kI2).bits_with_overhead, 2.0);
  EXPECT_DOUBLE_EQ(st.get(TernaryFormat::kTQ1).bits_symbols, 1.6);
  EXPECT_DOUBLE_EQ(st.get(TernaryFormat::kTQ1).bits_with_overhead, 1.625);
  const auto& b = st.get(TernaryFormat::kBitcos);
  EXPECT_DOUBLE_EQ(b.bits_symbols, 2.0 - st.zero_density);
  EXPECT_GT(b.bits_with_overhead, b.bits_symbols);
  EXPECT_LT(b.bits_with_overhead, b.bits_symbols + 0.002);  // sign offsets: 64 bits per 16 x 2560 weights
  EXPECT_DOUBLE_EQ(b.bits_with_scales, 8.0 * static_cast<double>(b.bytes + 2) / (n * k));
  EXPECT_DOUBLE_EQ(st.get(TernaryFormat::kInt8).bits_symbols, 8.0);
}

TEST(TernaryFormats, StatsRejectBadValues) {
  std::vector<int8_t> w = {0, 1, 2};
  EXPECT_THROW(ternary_tensor_stats(w.data(), 1, 3), Error);
  EXPECT_THROW(ternary_tensor_stats(w.data(), 0, 3), Error);
}

TEST(TernaryFormats, BadValuesAndShapesRejected) {
  for (int8_t bad : {int8_t{2}, int8_t{-2}, int8_t{127}, int8_t{-128}}) {
    std::vector<int8_t> w = {0, 1, -1, bad, 0, 0};
    for (TernaryFormat f : kAllFormats) EXPECT_THROW(pack_ternary(f, w.data(), 2, 3), Error);
  }
  std::vector<int8_t> w = {0, 1};
  for (TernaryFormat f : kAllFormats) {
    EXPECT_THROW(pack_ternary(f, w.data(), 0, 2), Error);
    EXPECT_THROW(pack_ternary(f, w.data(), 2, -1), Error);
  }
}

TEST(TernaryFormats, BuffersReloadWithoutRepacking) {
  const int64_t n = 37, k = 2597;
  const auto w = random_ternary(n, k, 0.4, 11);
  std::vector<int8_t> x(static_cast<size_t>(3 * k));
  std::mt19937 rng(5);
  for (auto& v : x) v = static_cast<int8_t>(rng());
  for (TernaryFormat f : kAllFormats) {
    auto p = pack_ternary(f, w.data(), n, k);
    std::vector<int32_t> want(static_cast<size_t>(3 * n)), got(want.size());
    cpu::ternary_gemm_i32(*p, x.data(), 3, want.data());
    // Save the buffers as a file writer would (64-bit aligned copies), then load them back.
    std::vector<std::vector<uint64_t>> saved;
    size_t total = 0;
    for (const TernaryBuffer& b : p->buffers()) {
      saved.emplace_back((b.bytes.size() + 7) / 8);
      std::memcpy(saved.back().data(), b.bytes.data(), b.bytes.size());
      total += b.bytes.size();
    }
    EXPECT_EQ(total, p->bytes());
    std::vector<std::span<const uint8_t>> spans;
    const auto bufs = p->buffers();
    for (size_t i = 0; i < saved.size(); ++i) {
      spans.emplace_back(reinterpret_cast<const uint8_t*>(saved[i].data()), bufs[i].bytes.size());
    }
    for (bool copy : {false, true}) {
      auto q = ternary_from_buffers(f, n, k, spans, copy);
      ASSERT_EQ(q->format(), f);
      EXPECT_EQ(q->bytes(), p->bytes());
      if (!copy && f != TernaryFormat::kInt8) {
        EXPECT_EQ(q->buffers()[0].bytes.data(), spans[0].data()) << "borrowed, not copied";
      }
      std::vector<int8_t> back(w.size());
      q->unpack(back.data());
      EXPECT_EQ(back, w) << ternary_format_name(f);
      cpu::ternary_gemm_i32(*q, x.data(), 3, got.data());
      EXPECT_EQ(got, want) << ternary_format_name(f);
    }
    // Wrong buffer count / size.
    EXPECT_THROW(ternary_from_buffers(f, n, k, std::span(spans).first(0)), Error);
    std::vector<std::span<const uint8_t>> shorter = spans;
    shorter[0] = shorter[0].first(shorter[0].size() - 1);
    EXPECT_THROW(ternary_from_buffers(f, n, k, shorter), Error);
    EXPECT_THROW(ternary_from_buffers(f, n + 16, k, spans), Error);
  }
}

TEST(TernaryFormats, BitcosRejectsInconsistentOffsets) {
  const int64_t n = 40, k = 300;
  const auto w = random_ternary(n, k, 0.3, 2);
  auto p = pack_ternary(TernaryFormat::kBitcos, w.data(), n, k);
  const auto bufs = p->buffers();
  std::vector<uint64_t> offsets((bufs[2].bytes.size()) / 8);
  std::memcpy(offsets.data(), bufs[2].bytes.data(), bufs[2].bytes.size());
  offsets[1] += 1;
  std::vector<std::span<const uint8_t>> spans = {bufs[0].bytes, bufs[1].bytes,
                                                 {reinterpret_cast<const uint8_t*>(offsets.data()), bufs[2].bytes.size()}};
  EXPECT_THROW(ternary_from_buffers(TernaryFormat::kBitcos, n, k, spans), Error);
  offsets[1] -= 1;
  offsets[0] = 1;
  EXPECT_THROW(ternary_from_buffers(TernaryFormat::kBitcos, n, k, spans), Error);
}
