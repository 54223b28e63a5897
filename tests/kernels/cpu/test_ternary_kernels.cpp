#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/dtype.h"
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

// fp16 group scales (Q2_0's precision): each path's result equals the float32 call over the widened scales.
TEST(TernaryKernels, GemmF32Fp16GroupScalesEqualWidenedFloat32) {
  PathGuard guard;
  std::mt19937 rng(7);
  for (const auto& [n, k] : {std::pair<int64_t, int64_t>{37, 2597}, {16, 128}, {5, 300}}) {
    const int64_t G = (k + 127) / 128, Mmax = 9;
    const auto w = random_ternary(n, k, 0.42, rng);
    const auto x = random_x(Mmax, k, rng);
    std::uniform_real_distribution<float> u(0.001f, 0.05f);
    std::vector<float> gs(static_cast<size_t>(n * G)), as(Mmax, 0.02f);
    for (auto& v : gs) v = f16_to_f32(f32_to_f16(u(rng)));  // exact in fp16
    const std::vector<float> tiled = cpu::tile_group_scales(gs.data(), n, G);
    std::vector<uint16_t> tiled16(tiled.size());
    for (size_t i = 0; i < tiled.size(); ++i) tiled16[i] = f32_to_f16(tiled[i]);
    for (TernaryFormat f : kFormats) {
      auto p = pack_ternary(f, w.data(), n, k);
      for (int64_t M : {int64_t{1}, int64_t{3}, Mmax}) {
        for (KernelPath path : supported_paths()) {
          cpu::set_cpu_kernel_path(path);
          std::vector<float> want(static_cast<size_t>(M * n)), got(want.size(), -1.0f);
          cpu::ternary_gemm_f32(*p, x.data(), as.data(), M, tiled.data(), want.data());
          cpu::ternary_gemm_f32(*p, x.data(), as.data(), M, tiled16.data(), got.data());
          ASSERT_EQ(0, std::memcmp(got.data(), want.data(), want.size() * sizeof(float)))
              << ternary_format_name(f) << " path " << cpu::kernel_path_name(path) << " M=" << M;
        }
      }
    }
  }
}

// The largest group sums the format admits: every activation -128 or 127 against all-(+1) / all-(-1) rows
// (|sum| = 128 x 128 = 16,384 per group), where a kernel summing a group in 16-bit lanes is closest to overflow.
TEST(TernaryKernels, GemmF32GroupSumsAtTheLimits) {
  PathGuard guard;
  const int64_t n = 32, k = 512, G = 4;
  std::vector<int8_t> w(static_cast<size_t>(n * k));
  for (int64_t r = 0; r < n; ++r)
    for (int64_t i = 0; i < k; ++i) w[r * k + i] = r % 3 == 0 ? 1 : r % 3 == 1 ? -1 : static_cast<int8_t>((i % 3) - 1);
  for (int8_t v : {int8_t{-128}, int8_t{127}}) {
    const int64_t M = 6;
    std::vector<int8_t> x(static_cast<size_t>(M * k), v);
    std::vector<float> gs(static_cast<size_t>(n * G), 1.0f), as(M, 1.0f);
    const std::vector<float> tiled = cpu::tile_group_scales(gs.data(), n, G);
    const auto want = naive(w, x, M, n, k);
    for (TernaryFormat f : kFormats) {
      auto p = pack_ternary(f, w.data(), n, k);
      for (KernelPath path : supported_paths()) {
        cpu::set_cpu_kernel_path(path);
        std::vector<float> got(static_cast<size_t>(M * n));
        cpu::ternary_gemm_f32(*p, x.data(), as.data(), M, tiled.data(), got.data());
        for (size_t i = 0; i < got.size(); ++i)
          ASSERT_EQ(got[i], static_cast<float>(want[i])) << ternary_format_name(f) << " path "
                                                         << cpu::kernel_path_name(path) << " i=" << i;
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
