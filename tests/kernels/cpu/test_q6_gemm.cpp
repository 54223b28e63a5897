// q6 head kernels (kernels/cpu/q6_gemm.h): the scalar reference against a double-precision product of the
// dequantized weights, the SIMD kernel (AVX2, also taken on the AVX-512 path) against the reference on random
// shapes (row counts that split unevenly over threads, K with and without whole groups of 4 blocks, 1..9 tokens),
// the extreme codes and activations, and results independent of the thread count.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "core/parallel.h"
#include "formats/q6_rows.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/q6_gemm.h"

using namespace tritium;

namespace {

struct Case {
  Q6Rows q;
  std::vector<int8_t> x;
  std::vector<float> act;
  int64_t M;
};

Case random_case(int64_t N, int64_t K, int64_t M, std::mt19937& rng, bool extreme = false) {
  std::normal_distribution<float> nd(0.0f, 0.05f);
  std::uniform_int_distribution<int> xd(-128, 127), sign(0, 1);
  std::vector<float> w(static_cast<size_t>(N * K));
  for (auto& v : w) v = extreme ? (sign(rng) ? 0.25f : -0.25f) : nd(rng);
  Case c{quantize_q6_rows(w.data(), N, K), std::vector<int8_t>(static_cast<size_t>(M * K)),
         std::vector<float>(static_cast<size_t>(M)), M};
  for (auto& v : c.x) v = static_cast<int8_t>(extreme ? -128 : xd(rng));
  for (int64_t m = 0; m < M; ++m) c.act[m] = 0.01f * static_cast<float>(m + 1);
  return c;
}

// Tolerance of a float sum in another order: relative to the sum of the magnitudes of its terms.
std::vector<double> magnitudes(const Case& c) {
  const int64_t N = c.q.n, K = c.q.k;
  const std::vector<float> d = c.q.dequantize();
  std::vector<double> mag(static_cast<size_t>(c.M * N));
  for (int64_t m = 0; m < c.M; ++m)
    for (int64_t r = 0; r < N; ++r) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k) s += std::fabs(static_cast<double>(d[r * K + k]) * c.x[m * K + k]);
      mag[m * N + r] = c.act[m] * s;
    }
  return mag;
}

// The SIMD paths this CPU runs.
std::vector<cpu::KernelPath> simd_paths() {
  std::vector<cpu::KernelPath> out;
  for (auto p : {cpu::KernelPath::kAvx2, cpu::KernelPath::kAvx512})
    if (cpu::kernel_path_supported(p)) out.push_back(p);
  return out;
}

constexpr cpu::KernelPath kRef = cpu::KernelPath::kRef;

std::vector<float> run(const Case& c, cpu::KernelPath path) {
  std::vector<float> y(static_cast<size_t>(c.M * c.q.n), -1.0f);
  if (path == kRef) {
    q6_gemm_ref(c.q, c.x.data(), c.act.data(), c.M, y.data());
    return y;
  }
  cpu::set_cpu_kernel_path(path);
  q6_gemm(c.q, c.x.data(), c.act.data(), c.M, y.data());
  cpu::reset_cpu_kernel_path();
  return y;
}

}  // namespace

TEST(Q6Gemm, ReferenceMatchesDequantizedProduct) {
  std::mt19937 rng(5);
  const Case c = random_case(203, 320, 3, rng);
  const std::vector<float> d = c.q.dequantize(), y = run(c, kRef);
  const int64_t N = c.q.n, K = c.q.k;
  for (int64_t m = 0; m < c.M; ++m)
    for (int64_t r = 0; r < N; ++r) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k) s += static_cast<double>(d[r * K + k]) * c.x[m * K + k];
      ASSERT_NEAR(y[m * N + r], c.act[m] * s, 1e-4 * std::max(1.0, std::fabs(c.act[m] * s))) << m << "," << r;
    }
}

TEST(Q6Gemm, SimdMatchesReferenceOnRandomShapes) {
  if (simd_paths().empty()) GTEST_SKIP() << "neither AVX2 nor AVX-512 VNNI";
  std::mt19937 rng(17);
  std::uniform_int_distribution<int64_t> nd(1, 700), kd(1, 45), md(1, 9);
  for (int trial = 0; trial < 24; ++trial) {
    const int64_t N = nd(rng), K = 64 * kd(rng), M = md(rng);
    const Case c = random_case(N, K, M, rng);
    const std::vector<float> ref = run(c, kRef);
    const std::vector<double> mag = magnitudes(c);
    for (auto path : simd_paths()) {
      SCOPED_TRACE(testing::Message() << cpu::kernel_path_name(path) << " N " << N << " K " << K << " M " << M);
      const std::vector<float> got = run(c, path);
      for (size_t i = 0; i < ref.size(); ++i) ASSERT_NEAR(got[i], ref[i], 1e-5 * mag[i] + 1e-30) << i;
    }
  }
}

TEST(Q6Gemm, ExtremeCodesAndActivations) {
  if (simd_paths().empty()) GTEST_SKIP() << "neither AVX2 nor AVX-512 VNNI";
  std::mt19937 rng(23);
  const Case c = random_case(67, 2560, 5, rng, true);  // every code +-31, every activation -128
  const std::vector<float> ref = run(c, kRef);
  const std::vector<double> mag = magnitudes(c);
  for (auto path : simd_paths()) {
    SCOPED_TRACE(cpu::kernel_path_name(path));
    const std::vector<float> got = run(c, path);
    for (size_t i = 0; i < ref.size(); ++i) ASSERT_NEAR(got[i], ref[i], 1e-5 * mag[i]) << i;
  }
}

TEST(Q6Gemm, SameResultsOnOneAndTwoThreads) {
  std::mt19937 rng(29);
  const Case c = random_case(1031, 576, 6, rng);
  const int before = num_threads();
  std::vector<cpu::KernelPath> paths = simd_paths();
  paths.push_back(kRef);
  for (auto path : paths) {
    set_num_threads(1);
    const std::vector<float> one = run(c, path);
    set_num_threads(2);
    const std::vector<float> two = run(c, path);
    EXPECT_EQ(one, two) << cpu::kernel_path_name(path);
  }
  set_num_threads(before);
}
