// int8 GEMM kernels: every variant must equal the scalar reference exactly (integers), on odd
// shapes that exercise all register tiles and K tails.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <random>
#include <vector>

#include "core/error.h"
#include "core/parallel.h"
#include "kernels/cpu/int8_gemm.h"

using namespace tritium;

namespace {

std::vector<int8_t> random_codes(size_t n, std::mt19937& rng, int lim = 127) {
  std::uniform_int_distribution<int> d(-lim, lim);
  std::vector<int8_t> v(n);
  for (auto& e : v) e = static_cast<int8_t>(d(rng));
  return v;
}

std::vector<Int8Kernel> supported_kernels() {
  std::vector<Int8Kernel> out;
  for (Int8Kernel k : {Int8Kernel::kRef, Int8Kernel::kAvx2, Int8Kernel::kAvx512})
    if (int8_kernel_supported(k)) out.push_back(k);
  return out;
}

// Independent plain reference (no tiling, int64 sums).
std::vector<int32_t> naive(const std::vector<int8_t>& x, const std::vector<int8_t>& w, int64_t M, int64_t N, int64_t K) {
  std::vector<int32_t> acc(static_cast<size_t>(M * N));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      int64_t s = 0;
      for (int64_t k = 0; k < K; ++k) s += int64_t{x[m * K + k]} * w[n * K + k];
      acc[m * N + n] = static_cast<int32_t>(s);
    }
  return acc;
}

}  // namespace

TEST(Int8Gemm, AllVariantsExactOnRandomShapes) {
  std::mt19937 rng(1234);
  const int64_t Ks[] = {1, 7, 31, 32, 33, 63, 64, 65, 127, 129, 255, 257, 1000};
  const int64_t Ns[] = {1, 3, 4, 5, 9, 17, 33};
  const int64_t Ms[] = {1, 2, 3, 5, 8, 17, 64, 65};
  const auto kernels = supported_kernels();
  ASSERT_GE(kernels.size(), 1u);
  int checked = 0;
  for (int64_t K : Ks)
    for (int64_t N : Ns)
      for (int64_t M : Ms) {
        if ((K * N * M) % 3 != 0 && M > 8) continue;  // thin the grid a little, keep all small cases
        auto x = random_codes(static_cast<size_t>(M * K), rng);
        auto w = random_codes(static_cast<size_t>(N * K), rng);
        std::vector<int32_t> rs(static_cast<size_t>(N));
        int8_row_sums(w.data(), N, K, rs.data());
        const auto want = naive(x, w, M, N, K);
        for (Int8Kernel kern : kernels) {
          std::vector<int32_t> got(static_cast<size_t>(M * N), -7);
          gemm_s8s8_s32(x.data(), w.data(), rs.data(), M, N, K, got.data(), kern);
          ASSERT_EQ(got, want) << int8_kernel_name(kern) << " M=" << M << " N=" << N << " K=" << K;
          ++checked;
        }
      }
  EXPECT_GT(checked, 300);
}

TEST(Int8Gemm, ExtremeCodesAndMultithreaded) {
  // All +-127 (largest products, pair sums right at the vpmaddubsw bound) on a larger shape that
  // splits over threads.
  std::mt19937 rng(7);
  const int64_t M = 3, N = 301, K = 4099;
  std::vector<int8_t> x(static_cast<size_t>(M * K)), w(static_cast<size_t>(N * K));
  std::bernoulli_distribution b(0.5);
  for (auto& e : x) e = b(rng) ? 127 : -127;
  for (auto& e : w) e = b(rng) ? 127 : -127;
  std::vector<int32_t> rs(static_cast<size_t>(N));
  int8_row_sums(w.data(), N, K, rs.data());
  const auto want = naive(x, w, M, N, K);
  set_num_threads(2);
  for (Int8Kernel kern : supported_kernels()) {
    std::vector<int32_t> got(static_cast<size_t>(M * N));
    gemm_s8s8_s32(x.data(), w.data(), rs.data(), M, N, K, got.data(), kern);
    EXPECT_EQ(got, want) << int8_kernel_name(kern);
  }
  // x = w = 127 everywhere: the largest sum, K * 16129.
  std::fill(x.begin(), x.end(), 127);
  std::fill(w.begin(), w.end(), 127);
  int8_row_sums(w.data(), N, K, rs.data());
  for (Int8Kernel kern : supported_kernels()) {
    std::vector<int32_t> got(static_cast<size_t>(M * N));
    gemm_s8s8_s32(x.data(), w.data(), rs.data(), M, N, K, got.data(), kern);
    EXPECT_EQ(got[0], K * 16129) << int8_kernel_name(kern);
    EXPECT_EQ(got[M * N - 1], K * 16129) << int8_kernel_name(kern);
  }
}

TEST(Int8Gemm, RowResultIndependentOfBatch) {
  std::mt19937 rng(99);
  const int64_t M = 9, N = 13, K = 200;
  auto x = random_codes(static_cast<size_t>(M * K), rng);
  auto w = random_codes(static_cast<size_t>(N * K), rng);
  std::vector<int32_t> rs(static_cast<size_t>(N));
  int8_row_sums(w.data(), N, K, rs.data());
  for (Int8Kernel kern : supported_kernels()) {
    std::vector<int32_t> all(static_cast<size_t>(M * N)), one(static_cast<size_t>(N));
    gemm_s8s8_s32(x.data(), w.data(), rs.data(), M, N, K, all.data(), kern);
    for (int64_t m = 0; m < M; ++m) {
      gemm_s8s8_s32(x.data() + m * K, w.data(), rs.data(), 1, N, K, one.data(), kern);
      EXPECT_TRUE(std::equal(one.begin(), one.end(), all.begin() + m * N)) << int8_kernel_name(kern) << " m=" << m;
    }
  }
}

TEST(Int8Gemm, RejectsBadArguments) {
  int8_t x[4] = {}, w[4] = {};
  int32_t acc[4];
  EXPECT_THROW(gemm_s8s8_s32(x, w, nullptr, -1, 1, 1, acc, Int8Kernel::kRef), Error);
  EXPECT_THROW(gemm_s8s8_s32(x, w, nullptr, 1, 1, kInt8GemmMaxK + 1, acc, Int8Kernel::kRef), Error);
  if (int8_kernel_supported(Int8Kernel::kAvx512)) {
    EXPECT_THROW(gemm_s8s8_s32(x, w, nullptr, 1, 1, 4, acc, Int8Kernel::kAvx512), Error);
  }
}

TEST(Int8Gemm, WeightOnlyVariantsMatchFp64) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (int64_t K : {1, 15, 16, 17, 100, 513}) {
    const int64_t M = 5, N = 7;
    std::vector<float> x(static_cast<size_t>(M * K)), sc(static_cast<size_t>(N));
    for (auto& e : x) e = u(rng);
    for (auto& e : sc) e = 0.01f + std::fabs(u(rng));
    auto w = random_codes(static_cast<size_t>(N * K), rng);
    for (Int8Kernel kern : supported_kernels()) {
      std::vector<float> y(static_cast<size_t>(M * N));
      gemm_f32s8_f32(x.data(), w.data(), sc.data(), M, N, K, y.data(), kern);
      for (int64_t m = 0; m < M; ++m)
        for (int64_t n = 0; n < N; ++n) {
          double s = 0, mag = 0;
          for (int64_t k = 0; k < K; ++k) {
            s += double{x[m * K + k]} * w[n * K + k];
            mag += std::fabs(double{x[m * K + k]} * w[n * K + k]);
          }
          EXPECT_NEAR(y[m * N + n], s * sc[n], 1e-6 * mag * sc[n] + 1e-30) << int8_kernel_name(kern) << " K=" << K;
        }
    }
  }
}

TEST(Int8Gemm, KernelNames) {
  EXPECT_EQ(int8_kernel_name(Int8Kernel::kRef), "ref");
  EXPECT_EQ(int8_kernel_name(Int8Kernel::kAvx2), "avx2");
  EXPECT_EQ(int8_kernel_name(Int8Kernel::kAvx512), "avx512");
  EXPECT_TRUE(int8_kernel_supported(int8_default_kernel()));
  EXPECT_EQ(parse_int8_kernel("avx512"), Int8Kernel::kAvx512);
  EXPECT_EQ(parse_int8_kernel("ref"), Int8Kernel::kRef);
  EXPECT_THROW(parse_int8_kernel("neon", "TRITIUM_KERNEL"), Error);
  // TRITIUM_KERNEL, when the test runner sets it, must be what the default resolves to.
  if (const char* env = std::getenv("TRITIUM_KERNEL"); env && *env) {
    EXPECT_EQ(int8_default_kernel(), parse_int8_kernel(env));
  }
}
