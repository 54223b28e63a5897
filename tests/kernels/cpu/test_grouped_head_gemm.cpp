// The grouped head kernels, q4 (kernels/cpu/q4_gemm.h) and q6 (kernels/cpu/q6_gemm.h), one typed suite: the
// scalar reference against a double-precision product of the dequantized weights, every SIMD path the CPU runs
// (AVX2: the AVX2 kernel of each format; AVX-512: the VNNI kernel of each format) against the reference
// on random shapes (row counts that split unevenly over threads, K with and without whole groups of 4 blocks,
// 1..9 tokens: tiles of 4 and of 8 with remainders), the extreme codes and activations, and results independent
// of the thread count.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "core/parallel.h"
#include "formats/q4_rows.h"
#include "formats/q6_rows.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/q4_gemm.h"
#include "kernels/cpu/q6_gemm.h"

using namespace tritium;

namespace {

struct Q4 {
  using Rows = Q4Rows;
  static Rows quantize(const float* w, int64_t n, int64_t k) { return quantize_q4_rows(w, n, k); }
  static void ref(const Rows& q, const int8_t* x, const float* a, int64_t M, float* y) { q4_gemm_ref(q, x, a, M, y); }
  static void gemm(const Rows& q, const int8_t* x, const float* a, int64_t M, float* y) { q4_gemm(q, x, a, M, y); }
};
struct Q6 {
  using Rows = Q6Rows;
  static Rows quantize(const float* w, int64_t n, int64_t k) { return quantize_q6_rows(w, n, k); }
  static void ref(const Rows& q, const int8_t* x, const float* a, int64_t M, float* y) { q6_gemm_ref(q, x, a, M, y); }
  static void gemm(const Rows& q, const int8_t* x, const float* a, int64_t M, float* y) { q6_gemm(q, x, a, M, y); }
};

template <class F>
struct Case {
  typename F::Rows q;
  std::vector<int8_t> x;
  std::vector<float> act;
  int64_t M;
};

template <class F>
Case<F> random_case(int64_t N, int64_t K, int64_t M, std::mt19937& rng, bool extreme = false) {
  std::normal_distribution<float> nd(0.0f, 0.05f);
  std::uniform_int_distribution<int> xd(-128, 127), sign(0, 1);
  std::vector<float> w(static_cast<size_t>(N * K));
  for (auto& v : w) v = extreme ? (sign(rng) ? 0.25f : -0.25f) : nd(rng);
  Case<F> c{F::quantize(w.data(), N, K), std::vector<int8_t>(static_cast<size_t>(M * K)),
         std::vector<float>(static_cast<size_t>(M)), M};
  for (auto& v : c.x) v = static_cast<int8_t>(extreme ? -128 : xd(rng));
  for (int64_t m = 0; m < M; ++m) c.act[m] = 0.01f * static_cast<float>(m + 1);
  return c;
}

// Tolerance of a float sum in another order: relative to the sum of the magnitudes of its terms.
template <class F>
std::vector<double> magnitudes(const Case<F>& c) {
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

template <class F>
std::vector<float> run(const Case<F>& c, cpu::KernelPath path) {
  std::vector<float> y(static_cast<size_t>(c.M * c.q.n), -1.0f);
  if (path == kRef) {
    F::ref(c.q, c.x.data(), c.act.data(), c.M, y.data());
    return y;
  }
  cpu::set_cpu_kernel_path(path);
  F::gemm(c.q, c.x.data(), c.act.data(), c.M, y.data());
  cpu::reset_cpu_kernel_path();
  return y;
}

template <class F>
class GroupedHeadGemm : public testing::Test {};
using Formats = testing::Types<Q4, Q6>;
struct FormatName {
  template <class F>
  static std::string GetName(int) {
    return std::is_same_v<F, Q4> ? "q4" : "q6";
  }
};
TYPED_TEST_SUITE(GroupedHeadGemm, Formats, FormatName);

}  // namespace

TYPED_TEST(GroupedHeadGemm, ReferenceMatchesDequantizedProduct) {
  std::mt19937 rng(5);
  const auto c = random_case<TypeParam>(203, 320, 3, rng);
  const std::vector<float> d = c.q.dequantize(), y = run(c, kRef);
  const int64_t N = c.q.n, K = c.q.k;
  for (int64_t m = 0; m < c.M; ++m)
    for (int64_t r = 0; r < N; ++r) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k) s += static_cast<double>(d[r * K + k]) * c.x[m * K + k];
      ASSERT_NEAR(y[m * N + r], c.act[m] * s, 1e-4 * std::max(1.0, std::fabs(c.act[m] * s))) << m << "," << r;
    }
}

TYPED_TEST(GroupedHeadGemm, SimdMatchesReferenceOnRandomShapes) {
  if (simd_paths().empty()) GTEST_SKIP() << "neither AVX2 nor AVX-512 VNNI";
  std::mt19937 rng(17);
  std::uniform_int_distribution<int64_t> nd(1, 700), kd(1, 45), md(1, 9);
  for (int trial = 0; trial < 24; ++trial) {
    const int64_t N = nd(rng), K = 64 * kd(rng), M = md(rng);
    const auto c = random_case<TypeParam>(N, K, M, rng);
    const std::vector<float> ref = run(c, kRef);
    const std::vector<double> mag = magnitudes(c);
    for (auto path : simd_paths()) {
      SCOPED_TRACE(testing::Message() << cpu::kernel_path_name(path) << " N " << N << " K " << K << " M " << M);
      const std::vector<float> got = run(c, path);
      for (size_t i = 0; i < ref.size(); ++i) ASSERT_NEAR(got[i], ref[i], 1e-5 * mag[i] + 1e-30) << i;
    }
  }
}

TYPED_TEST(GroupedHeadGemm, ExtremeCodesAndActivations) {
  if (simd_paths().empty()) GTEST_SKIP() << "neither AVX2 nor AVX-512 VNNI";
  std::mt19937 rng(23);
  const auto c = random_case<TypeParam>(67, 2560, 5, rng, true);  // every code at its extreme (q4 +-7, q6 +-31), every activation -128
  const std::vector<float> ref = run(c, kRef);
  const std::vector<double> mag = magnitudes(c);
  for (auto path : simd_paths()) {
    SCOPED_TRACE(cpu::kernel_path_name(path));
    const std::vector<float> got = run(c, path);
    for (size_t i = 0; i < ref.size(); ++i) ASSERT_NEAR(got[i], ref[i], 1e-5 * mag[i]) << i;
  }
}

TYPED_TEST(GroupedHeadGemm, SameResultsOnOneAndTwoThreads) {
  std::mt19937 rng(29);
  const auto c = random_case<TypeParam>(1031, 576, 6, rng);
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
