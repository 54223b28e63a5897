#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/error.h"
#include "core/parallel.h"
#include "kernels/cpu/dispatch.h"
#include "formats/ternary_format.h"
#include "kernels/cpu/ternary_kernels.h"
#include "test_util.h"

using namespace tritium;
using cpu::KernelPath;

namespace {

using test::random_ternary;

std::vector<int8_t> random_x(int64_t m, int64_t k, std::mt19937& rng) {
  std::vector<int8_t> x(static_cast<size_t>(m * k));
  for (auto& v : x) v = static_cast<int8_t>(rng());  // full range, -128 included
  return x;
}

// The plainest possible oracle: int32 dot products over the original int8 weights.
std::vector<int32_t> naive(const std::vector<int8_t>& w, const std::vector<int8_t>& x, int64_t M, int64_t N,
                           int64_t K) {
  std::vector<int32_t> y(static_cast<size_t>(M * N));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      int32_t s = 0;
      for (int64_t k = 0; k < K; ++k) s += x[m * K + k] * w[n * K + k];
      y[m * N + n] = s;
    }
  return y;
}

std::vector<KernelPath> supported_paths() {
  std::vector<KernelPath> out;
  for (KernelPath p : {KernelPath::kRef, KernelPath::kAvx2, KernelPath::kAvx512, KernelPath::kAmx})
    if (cpu::kernel_path_supported(p)) out.push_back(p);
  return out;
}

const TernaryFormat kFormats[] = {TernaryFormat::kInt8, TernaryFormat::kI2, TernaryFormat::kTQ1,
                                  TernaryFormat::kBitcos};

struct PathGuard {
  ~PathGuard() {
    cpu::reset_cpu_kernel_path();
    set_num_threads(0);
  }
};

}  // namespace

TEST(TernaryKernels, PathNamesAndForcing) {
  PathGuard guard;
  EXPECT_EQ(cpu::parse_kernel_path("avx512"), KernelPath::kAvx512);
  EXPECT_EQ(cpu::parse_kernel_path("amx"), KernelPath::kAmx);
  EXPECT_THROW(cpu::parse_kernel_path("sse"), Error);
  EXPECT_TRUE(cpu::kernel_path_supported(KernelPath::kRef));
  for (KernelPath p : supported_paths()) {
    cpu::set_cpu_kernel_path(p);
    EXPECT_EQ(cpu::cpu_kernel_path(), p);
  }
  cpu::reset_cpu_kernel_path();
  EXPECT_TRUE(cpu::kernel_path_supported(cpu::cpu_kernel_path()));
  std::printf("[ info ] CPU kernel paths here:");
  for (KernelPath p : supported_paths()) std::printf(" %s", std::string(cpu::kernel_path_name(p)).c_str());
  std::printf("\n");
}

TEST(TernaryKernels, GemmI32EqualsOracleOnEveryPathShapeAndM) {
  PathGuard guard;
  std::mt19937 rng(1234);
  struct Case {
    int64_t n, k;
    double z;
  };
  const Case cases[] = {{37, 2560 + 37, 0.356}, {3, 100, 0.42}, {1, 1, 0.0}, {16, 128, 1.0}, {33, 255, 0.51},
                        {20, 700, 0.0}};
  const int64_t Ms[] = {1, 2, 3, 5, 8, 16, 17, 31, 48, 64, 65, 130};
  for (const Case& c : cases) {
    const auto w = random_ternary(c.n, c.k, c.z, rng);
    const auto x = random_x(130, c.k, rng);
    for (TernaryFormat f : kFormats) {
      auto p = pack_ternary(f, w.data(), c.n, c.k);
      for (int64_t M : Ms) {
        const auto want = naive(w, x, M, c.n, c.k);
        for (KernelPath path : supported_paths()) {
          cpu::set_cpu_kernel_path(path);
          for (int threads : {1, 2}) {
            set_num_threads(threads);
            std::vector<int32_t> got(want.size(), 0x5a5a5a5a);
            cpu::ternary_gemm_i32(*p, x.data(), M, got.data());
            ASSERT_EQ(got, want) << ternary_format_name(f) << " path " << cpu::kernel_path_name(path) << " N=" << c.n
                                 << " K=" << c.k << " M=" << M << " threads=" << threads;
          }
        }
      }
    }
  }
}

TEST(TernaryKernels, GemmF32GroupScalesIdenticalOnEveryPath) {
  PathGuard guard;
  std::mt19937 rng(99);
  struct Case {
    int64_t n, k;
  };
  for (const Case& c : {Case{37, 2597}, Case{3, 100}, Case{1, 1}, Case{19, 384}}) {
    const int64_t G = (c.k + 127) / 128, Mmax = 33;
    const auto w = random_ternary(c.n, c.k, 0.42, rng);
    const auto x = random_x(Mmax, c.k, rng);
    std::uniform_real_distribution<float> u(0.001f, 0.05f);
    std::vector<float> gs(static_cast<size_t>(c.n * G)), as(Mmax);
    for (auto& v : gs) v = u(rng);
    for (auto& v : as) v = u(rng);
    const std::vector<float> tiled = cpu::tile_group_scales(gs.data(), c.n, G);  // the GEMM's layout
    EXPECT_EQ(cpu::row_group_scales(tiled.data(), c.n, G), gs);
    for (TernaryFormat f : kFormats) {
      auto p = pack_ternary(f, w.data(), c.n, c.k);
      EXPECT_EQ(p->groups(), G);
      for (int64_t M : {int64_t{1}, int64_t{2}, int64_t{7}, Mmax}) {
        // Double-precision expectation (loose), and the ref path's floats (exact).
        std::vector<float> ref(static_cast<size_t>(M * c.n));
        cpu::set_cpu_kernel_path(KernelPath::kRef);
        cpu::ternary_gemm_f32(*p, x.data(), as.data(), M, tiled.data(), ref.data());
        for (int64_t m = 0; m < M; ++m)
          for (int64_t n = 0; n < c.n; ++n) {
            double s = 0;
            for (int64_t k = 0; k < c.k; ++k) s += double(gs[n * G + k / 128]) * x[m * c.k + k] * w[n * c.k + k];
            s *= as[m];
            ASSERT_NEAR(ref[m * c.n + n], s, 1e-4 * (1 + std::fabs(s)));
          }
        for (KernelPath path : supported_paths()) {
          cpu::set_cpu_kernel_path(path);
          for (int threads : {1, 2}) {
            set_num_threads(threads);
            std::vector<float> got(ref.size(), -1.0f);
            cpu::ternary_gemm_f32(*p, x.data(), as.data(), M, tiled.data(), got.data());
            ASSERT_EQ(0, std::memcmp(got.data(), ref.data(), ref.size() * sizeof(float)))
                << ternary_format_name(f) << " path " << cpu::kernel_path_name(path) << " M=" << M;
          }
        }
        // Batch invariance: row m alone gives the same bits as row m inside the batch.
        if (M > 1) {
          const int64_t m = M - 1;
          std::vector<float> one(static_cast<size_t>(c.n));
          cpu::reset_cpu_kernel_path();
          cpu::ternary_gemm_f32(*p, x.data() + m * c.k, as.data() + m, 1, tiled.data(), one.data());
          ASSERT_EQ(0, std::memcmp(one.data(), ref.data() + m * c.n, one.size() * sizeof(float)));
        }
      }
    }
  }
}

TEST(TernaryKernels, LargeShapeAtBitnetSizes) {
  // One 2B4T-sized projection (2560 x 2560) at M = 1 and 128 on the default path against the oracle.
  std::mt19937 rng(5);
  const int64_t n = 2560, k = 2560;
  const auto w = random_ternary(n, k, 0.42, rng);
  const auto x = random_x(128, k, rng);
  const auto want = naive(w, x, 128, n, k);
  for (TernaryFormat f : {TernaryFormat::kI2, TernaryFormat::kTQ1, TernaryFormat::kBitcos}) {
    auto p = pack_ternary(f, w.data(), n, k);
    std::vector<int32_t> got(want.size());
    cpu::ternary_gemm_i32(*p, x.data(), 128, got.data());
    ASSERT_EQ(got, want) << ternary_format_name(f);
    std::vector<int32_t> one(static_cast<size_t>(n));
    cpu::ternary_gemm_i32(*p, x.data() + 77 * k, 1, one.data());
    ASSERT_EQ(0, std::memcmp(one.data(), want.data() + 77 * n, n * sizeof(int32_t))) << ternary_format_name(f);
  }
}
