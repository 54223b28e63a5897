// Float kernels: the AVX2 GEMM is bit-identical to its reference and independent of M; attention matches a
// double-precision reference and does not depend on how a sequence is chunked.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <random>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/dispatch.h"
#include "core/dtype.h"
#include "core/parallel.h"
#include "kernels/cpu/gemm_bf16.h"
#include "kernels/cpu/gemm_f32.h"
#include "kernels/cpu/ops.h"

using namespace tritium;

namespace {
std::vector<float> randn(size_t n, uint32_t seed) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d;
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}
}  // namespace

TEST(CpuFloatKernels, GemmF32BitIdenticalToReferenceAndBatchInvariant) {
  if (!cpu::kernel_path_supported(cpu::KernelPath::kAvx2)) GTEST_SKIP() << "no AVX2";
  for (auto [M, N, K] : std::vector<std::tuple<int, int, int>>{{1, 1, 1}, {3, 37, 100}, {17, 64, 256}, {5, 9, 7}}) {
    auto x = randn(static_cast<size_t>(M) * K, 1), w = randn(static_cast<size_t>(N) * K, 2), b = randn(N, 3);
    std::vector<float> y(static_cast<size_t>(M) * N), yr(y.size()), y1(N);
    cpu::gemm_f32(x.data(), w.data(), b.data(), y.data(), M, N, K);
    cpu::gemm_f32_ref(x.data(), w.data(), b.data(), yr.data(), M, N, K);
    for (size_t i = 0; i < y.size(); ++i) ASSERT_EQ(y[i], yr[i]) << M << "x" << N << "x" << K << " at " << i;
    for (int m = 0; m < M; ++m) {  // each row alone gives the same bits as inside the batch
      cpu::gemm_f32(x.data() + static_cast<size_t>(m) * K, w.data(), b.data(), y1.data(), 1, N, K);
      for (int n = 0; n < N; ++n) ASSERT_EQ(y1[n], y[static_cast<size_t>(m) * N + n]);
    }
  }
}

TEST(CpuFloatKernels, AttentionMatchesDoubleReferenceAndChunking) {
  const int H = 4, KVH = 2, D = 64, ctx = 40;
  auto q = randn(static_cast<size_t>(ctx) * H * D, 4), k = randn(static_cast<size_t>(ctx) * KVH * D, 5),
       v = randn(static_cast<size_t>(ctx) * KVH * D, 6);
  std::vector<float> full(q.size());
  cpu::attention_causal(q.data(), k.data(), v.data(), full.data(), ctx, 0, H, KVH, D);
  // double reference
  for (int t = 0; t < ctx; ++t)
    for (int h = 0; h < H; ++h) {
      const int kh = h / (H / KVH);
      std::vector<double> s(t + 1);
      double mx = -1e300;
      for (int p = 0; p <= t; ++p) {
        double acc = 0;
        for (int d = 0; d < D; ++d) acc += double(q[(t * H + h) * D + d]) * k[(p * KVH + kh) * D + d];
        s[p] = acc / std::sqrt(double(D));
        mx = std::max(mx, s[p]);
      }
      double se = 0;
      for (auto& e : s) se += (e = std::exp(e - mx));
      for (int d = 0; d < D; ++d) {
        double o = 0;
        for (int p = 0; p <= t; ++p) o += s[p] / se * v[(p * KVH + kh) * D + d];
        ASSERT_NEAR(full[(t * H + h) * D + d], o, 1e-5) << t << " " << h << " " << d;
      }
    }
  // The last 7 queries as a separate chunk (start_pos 33) give bit-identical rows.
  std::vector<float> part(static_cast<size_t>(7) * H * D);
  cpu::attention_causal(q.data() + static_cast<size_t>(33) * H * D, k.data(), v.data(), part.data(), 7, 33, H, KVH, D);
  for (size_t i = 0; i < part.size(); ++i) ASSERT_EQ(part[i], full[static_cast<size_t>(33) * H * D + i]);
}

// attention_causal takes the query heads of a KV head together (attention_rows.h: attention_rows_avx2, and
// attention_rows_avx512 on AVX-512 paths, several positions and dimension chunks per pass); every output row is bit
// for bit the one-row kernel's, on both paths, for group sizes 1 to 12 (12: two calls of 8 and 4 rows), head sizes
// whose chunk count leaves a remainder (72: 9 chunks), position counts leaving every remainder of the position
// blocks, and a chunk with history.
TEST(CpuFloatKernels, AttentionHeadGroupsMatchTheOneRowKernelBitForBit) {
  if (!cpu::kernel_path_supported(cpu::KernelPath::kAvx2)) GTEST_SKIP() << "no AVX2";
  struct ResetPath {
    ~ResetPath() { cpu::reset_cpu_kernel_path(); }
  } reset;
  for (cpu::KernelPath path : {cpu::KernelPath::kAvx2, cpu::KernelPath::kAvx512}) {
    if (!cpu::kernel_path_supported(path)) continue;
    cpu::set_cpu_kernel_path(path);
    for (const int D : {64, 72, 128}) {
      const int ctx = D == 72 ? 70 : 37;
      for (auto [H, KVH] : std::vector<std::pair<int, int>>{{2, 2}, {6, 2}, {20, 5}, {12, 1}, {14, 2}}) {
        auto q = randn(static_cast<size_t>(ctx) * H * D, 7), k = randn(static_cast<size_t>(ctx) * KVH * D, 8),
             v = randn(static_cast<size_t>(ctx) * KVH * D, 9);
        const int64_t start = 29, T = ctx - start;
        std::vector<float> got(static_cast<size_t>(T) * H * D), scores(ctx);
        cpu::attention_causal(q.data() + static_cast<size_t>(start) * H * D, k.data(), v.data(), got.data(), T,
                              start, H, KVH, D);
        std::vector<float> want(static_cast<size_t>(D));
        for (int64_t t = 0; t < T; ++t)
          for (int h = 0; h < H; ++h) {
            const int64_t kvoff = static_cast<int64_t>(h / (H / KVH)) * D;
            cpu::detail::attention_row_avx2(q.data() + ((start + t) * H + h) * D, k.data() + kvoff, v.data() + kvoff,
                                            want.data(), scores.data(), start + t + 1,
                                            static_cast<int64_t>(KVH) * D, D, 1.0f / std::sqrt(static_cast<float>(D)));
            for (int d = 0; d < D; ++d)
              ASSERT_EQ(got[(t * H + h) * D + d], want[d])
                  << cpu::kernel_path_name(path) << " D " << D << " H " << H << " KVH " << KVH << " t " << t << " h "
                  << h << " d " << d;
          }
      }
    }
  }
}

TEST(CpuFloatKernels, ActivationQuantizationIsPerTokenAbsmax) {
  std::vector<float> x = {0.5f, -1.0f, 0.25f, 0.0f, /* row 2 */ 0.0f, 0.0f, 0.0f, 0.0f, /* row 3 */ 3.0f, 1.5f, -0.75f, 0.02f};
  std::vector<int8_t> q(12);
  std::vector<float> inv(3);
  cpu::quantize_rows_absmax_i8(x.data(), 3, 4, q.data(), inv.data());
  EXPECT_EQ(std::vector<int8_t>(q.begin(), q.begin() + 4), (std::vector<int8_t>{64, -127, 32, 0}));  // 63.5 -> 64 (even)
  EXPECT_FLOAT_EQ(inv[0], 1.0f / 127.0f);
  EXPECT_EQ(std::vector<int8_t>(q.begin() + 4, q.begin() + 8), (std::vector<int8_t>{0, 0, 0, 0}));
  EXPECT_FLOAT_EQ(inv[1], 1e-5f / 127.0f);
  EXPECT_EQ(std::vector<int8_t>(q.begin() + 8, q.end()), (std::vector<int8_t>{127, 64, -32, 1}));  // 63.5->64, -31.75->-32, .8467->1
}

// The bf16-weight GEMM gives gemm_f32's bits over the widened weights, on both kernel paths and any thread count.
TEST(CpuFloatKernels, GemmBf16BitIdenticalToGemmF32OnWidenedWeights) {
  for (auto [M, N, K] : std::vector<std::tuple<int, int, int>>{{1, 1, 1}, {1, 1000, 256}, {1, 23, 263}, {2, 19, 37}, {3, 37, 100}, {17, 70, 264}}) {
    auto x = randn(static_cast<size_t>(M) * K, 4), wf = randn(static_cast<size_t>(N) * K, 5), b = randn(N, 6);
    std::vector<uint16_t> wb(wf.size());
    for (size_t i = 0; i < wf.size(); ++i) {
      wb[i] = f32_to_bf16(wf[i]);
      wf[i] = bf16_to_f32(wb[i]);
    }
    std::vector<float> want(static_cast<size_t>(M) * N), got(want.size());
    for (int threads : {1, 2, 3}) {
      set_num_threads(threads);
      cpu::gemm_f32(x.data(), wf.data(), b.data(), want.data(), M, N, K);
      cpu::gemm_bf16w(x.data(), wb.data(), b.data(), got.data(), M, N, K);
      for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], want[i]) << M << "x" << N << "x" << K << " at " << i;
      cpu::gemm_f32_ref(x.data(), wf.data(), b.data(), want.data(), M, N, K);
      for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], want[i]) << "reference, at " << i;
    }
    set_num_threads(0);
  }
}

TEST(CpuFloatKernels, Relu2MulMatchesTheScalarDefinitionBitForBit) {
  // Lengths with and without a tail of the 4-wide loop; gates that are negative, +-0, tiny, huge, NaN and inf.
  for (int64_t n : {1, 3, 4, 7, 64, 6913}) {
    std::vector<float> g = randn(static_cast<size_t>(n), 11), u = randn(static_cast<size_t>(n), 12);
    const float special[] = {-0.0f, 0.0f, 1e-30f, -1e-30f, 3e30f, NAN, -INFINITY, INFINITY};
    for (size_t i = 0; i < std::size(special) && i < g.size(); ++i) g[g.size() - 1 - i] = special[i];
    std::vector<float> y(static_cast<size_t>(n));
    cpu::relu2_mul(g.data(), u.data(), y.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      const float r = g[i] > 0.0f ? g[i] : 0.0f;
      const float want = (r * r) * u[i];
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(y[i])) << n << " at " << i;
      } else {
        EXPECT_EQ(std::bit_cast<uint32_t>(y[i]), std::bit_cast<uint32_t>(want)) << n << " at " << i << " gate " << g[i];
      }
    }
  }
}
