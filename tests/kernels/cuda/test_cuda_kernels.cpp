// The CUDA kernels against the CPU scalar references: integer paths exactly, float paths within stated
// tolerances, on random shapes including ragged ones. Skipped (visibly) without CUDA or without a GPU; the tc2
// packing test runs everywhere.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/ops.h"
#include "formats/ternary_bitcos_gpu.h"
#include "formats/ternary_tc2.h"
#include "formats/ternary_tcb.h"
#include "kv/fp8.h"
#include "model/embedding.h"
#include "model/linear.h"
#include "backend/cuda/cuda_backend.h"
#include "test_util.h"

#if TRITIUM_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "backend/cuda/int8_linear.h"
#include "kernels/cuda/kernels.h"
#include "kernels/cuda/cuda_test_util.h"
#endif

using namespace tritium;

namespace {

// Random ternary weights (tests/test_util.h) with zero density z, 0.35 unless given.
std::vector<int8_t> random_ternary(std::mt19937& rng, int64_t n, int64_t k, double z = 0.35) {
  return test::random_ternary(n, k, z, rng);
}

}  // namespace

TEST(CudaTc2, PackRoundTripRagged) {
  std::mt19937 rng(7);
  for (auto [n, k] : std::vector<std::pair<int, int>>{{1, 1}, {3, 17}, {64, 64}, {65, 100}, {130, 2560}}) {
    auto w = random_ternary(rng, n, k);
    auto words = cuda::pack_tc2(w.data(), n, k);
    const auto s = cuda::Tc2Shape::of(n, k);
    ASSERT_EQ(static_cast<int64_t>(words.size()), s.words());
    EXPECT_EQ(cuda::unpack_tc2(words.data(), n, k), w) << n << "x" << k;
    // Byte-level spot check of the documented layout: row 0, k = 16 j + 4 g + b in byte b, bits 2g.
    for (int c = 0; c < std::min(k, 64); ++c) {
      const uint32_t code = (words[c / 16] >> (8 * (c % 4) + 2 * ((c % 16) / 4))) & 3u;
      EXPECT_EQ(static_cast<int>(code) - 1, w[c]);
    }
  }
  int8_t bad = 2;
  EXPECT_THROW(cuda::pack_tc2(&bad, 1, 1), Error);
}


// GPU BITCOS packing: exact round trip, the documented words, and the size bound (2 - z bits/weight + < 64 / k).
TEST(CudaBitcos, PackRoundTripRagged) {
  std::mt19937 rng(13);
  for (double z : {0.0, 0.36, 0.9, 1.0}) {
    for (auto [n, k] : std::vector<std::pair<int, int>>{{1, 1}, {3, 17}, {5, 31}, {64, 64}, {65, 100}, {7, 2560},
                                                        {130, 2567}}) {
      const auto w = random_ternary(rng, n, k, z);
      const auto b = cuda::pack_bitcos_gpu(w.data(), n, k);
      ASSERT_EQ(b.kp, (k + 63) / 64 * 64);
      ASSERT_EQ(b.groups, b.kp / 32);
      ASSERT_EQ(static_cast<int64_t>(b.masks.size()), n * b.groups);
      ASSERT_EQ(static_cast<int64_t>(b.row_offsets.size()), n + 1);
      ASSERT_EQ(b.signs.size(), b.row_offsets[n] + 1u);
      EXPECT_EQ(b.signs.back(), 0u);
      EXPECT_EQ(cuda::unpack_bitcos_gpu(b), w) << n << "x" << k << " z=" << z;
      // Layout spot check: presence bits, each row's sign words = ceil(nonzeros / 32), first sign bits.
      uint64_t nz = 0;
      for (int r = 0; r < n; ++r) {
        int row_nz = 0, first_sign = -1;
        for (int c = 0; c < k; ++c) {
          const bool present = (b.masks[static_cast<size_t>(r * b.groups + c / 32)] >> (c % 32)) & 1u;
          ASSERT_EQ(present, w[static_cast<size_t>(r) * k + c] != 0) << r << "," << c;
          if (present && first_sign < 0) first_sign = w[static_cast<size_t>(r) * k + c] < 0;
          row_nz += present;
        }
        EXPECT_EQ(b.row_offsets[r + 1] - b.row_offsets[r], static_cast<uint32_t>((row_nz + 31) / 32));
        if (first_sign >= 0) {
          EXPECT_EQ(static_cast<int>(b.signs[b.row_offsets[r]] & 1u), first_sign);
        }
        nz += static_cast<uint64_t>(row_nz);
      }
      EXPECT_EQ(b.nonzeros, nz);
      const double zeros = 1.0 - static_cast<double>(nz) / (static_cast<double>(n) * k);
      const double bound = static_cast<double>(b.kp) / k + (1.0 - zeros) + 64.0 / k + 64.0 / (static_cast<double>(n) * k);
      EXPECT_LE(b.bits_per_weight(), bound) << n << "x" << k;
    }
  }
  int8_t bad = -2;
  EXPECT_THROW(cuda::pack_bitcos_gpu(&bad, 1, 1), Error);
  EXPECT_THROW(cuda::pack_bitcos_gpu(&bad, 0, 1), Error);
}

// tcb packing: exact round trip, the row counts of -1, the activation planes, and the kernel's arithmetic
// emulated on the host from the packed words (D_j = popc(P & X_j) + popc(N & ~X_j); sum_j s_j 2^j D_j + neg =
// sum w x), so the layout documented in ternary_tcb.h is checked without a GPU.
TEST(CudaTcb, PackRoundTripAndHostEmulation) {
  std::mt19937 rng(17);
  std::uniform_int_distribution<int> xd(-128, 127);
  for (auto [n, k] : std::vector<std::pair<int, int>>{{1, 1}, {3, 17}, {16, 256}, {17, 300}, {40, 2560}, {9, 6912}}) {
    const auto w = random_ternary(rng, n, k, 0.3);
    const auto s = cuda::TcbShape::of(n, k);
    const auto t = cuda::pack_tcb(w.data(), n, k);
    ASSERT_EQ(static_cast<int64_t>(t.words.size()), s.words());
    ASSERT_EQ(s.words() * 16, s.np * s.kp);  // 2 bits per (padded) weight
    EXPECT_EQ(cuda::unpack_tcb(t.words.data(), n, k), w) << n << "x" << k;
    for (int r = 0; r < n; ++r) {
      int neg = 0;
      for (int c = 0; c < k; ++c) neg += w[static_cast<size_t>(r) * k + c] < 0;
      EXPECT_EQ(t.neg_count[r], neg);
    }
    const int M = 2;
    std::vector<int8_t> x(static_cast<size_t>(M) * k);
    for (auto& v : x) v = static_cast<int8_t>(xd(rng));
    const auto xb = cuda::pack_tcb_activations(x.data(), M, k);
    ASSERT_EQ(static_cast<int64_t>(xb.size()), M * s.plane_words());
    const int64_t kc = s.chunks();
    for (int m = 0; m < M; ++m)
      for (int r = 0; r < n; ++r) {
        int64_t ref = 0;
        for (int c = 0; c < k; ++c) ref += static_cast<int64_t>(w[static_cast<size_t>(r) * k + c]) * x[m * k + c];
        // Emulate the warp of row r's tile: lane (g, t) registers a0..a3, columns j = plane of lane j * 4 + t.
        const int64_t tile = r / 16, g = r % 8, hi = (r % 16) / 8;
        int64_t got = t.neg_count[r];
        for (int j = 0; j < 8; ++j) {
          int64_t d = 0;
          for (int64_t ch = 0; ch < kc; ++ch)
            for (int tt = 0; tt < 4; ++tt)
              for (int h = 0; h < 2; ++h) {
                auto a = [&](int plane) {
                  return t.words[static_cast<size_t>((((tile * kc + ch) * 2 + plane) * 32 + g * 4 + tt) * 4 + h * 2 + hi)];
                };
                const uint32_t xw = xb[static_cast<size_t>(m * s.plane_words() + (ch * 32 + j * 4 + tt) * 2 + h)];
                d += __builtin_popcount(a(0) & xw) + __builtin_popcount(a(1) & ~xw);
              }
          got += (j == 7 ? -128 : (1 << j)) * d;
        }
        ASSERT_EQ(got, ref) << n << "x" << k << " m=" << m << " row " << r;
      }
  }
  int8_t bad = 3;
  EXPECT_THROW(cuda::pack_tcb(&bad, 1, 1), Error);
  EXPECT_THROW(cuda::pack_tcb(&bad, 0, 1), Error);
}

#if !TRITIUM_HAVE_CUDA

TEST(CudaKernels, SkippedWithoutCuda) { GTEST_SKIP() << "built without CUDA: CUDA kernel tests skipped"; }

#else

using test::DevBuf;
using test::random_floats;

namespace {

// The projection of the bit-exactness tests: n = 328 rows (by default) in three weight segments (288 rows x 0.37,
// 20 x 1.9, n - 308 x 0.05), as a CPU TernaryLinear and as the matching GPU epilogue writing y [M, ldy].
constexpr int kProjRows = 3 * 96 + 40;
TernaryLinear segmented_linear(const std::vector<int8_t>& w, int k, int n = kProjRows) {
  return TernaryLinear(pack_ternary(TernaryFormat::kI2, w.data(), n, k), {{96 * 3, 0.37f}, {20, 1.9f}, {n - 308, 0.05f}});
}
// x [M, k] quantized on the GPU as a ternary projection's input (norm_quant without a norm weight): int8 rows
// q [M, kp], their dequantization multipliers inv [M] and row sums sq [M].
struct DeviceQuantized {
  DevBuf<int8_t> q;
  DevBuf<float> inv;
  DevBuf<int32_t> sq;
  DeviceQuantized(const std::vector<float>& x, int M, int k, int kp)
      : q(static_cast<size_t>(M) * kp), inv(M), sq(M) {
    const DevBuf<float> dx(x);
    cuda::norm_quant(dx.p, k, nullptr, nullptr, M, k, 1e-6f, nullptr, q.p, kp, inv.p, sq.p, nullptr);
  }
};
cuda::TernaryEpilogue segmented_epilogue(float* y, int n = kProjRows, int ldy = kProjRows) {
  cuda::TernaryEpilogue ep;
  ep.seg_end[0] = 288, ep.seg_end[1] = 308, ep.seg_end[2] = n;
  ep.seg_scale[0] = 0.37f, ep.seg_scale[1] = 1.9f, ep.seg_scale[2] = 0.05f;
  ep.y = y, ep.ldy = ldy;
  return ep;
}

}  // namespace

// The tiled GEMM's automatic K split (no GPU needed: sm_count() answers 132 without one): the fewest blocks of a
// cluster that fill the SMs, stopping where a block would keep fewer than 4 stages of 128 k. On an H100 / H200 the 2B4T
// shapes at 64 tokens take: o and qkv 4 (20 stages: 8 leaves blocks of 2-3 stages, 1.18x / 1.19x the time),
// down 8 (54 stages), gate_up 2 (108 row tiles).
TEST(CudaKernels, TiledGemmSplitKeepsFourStages) {
  const int sms = cuda::sm_count();
  for (int np : {64, 2560, 3840, 6912, 13824}) {
    for (int kp : {64, 256, 512, 2560, 6912, 8192}) {
      for (int M : {17, 64, 100, 256, 512}) {
        const int S = cuda::tiled_gemm_split_for(np, M, kp);
        const int64_t blocks = static_cast<int64_t>((np + 127) / 128) * ((M + 63) / 64);
        const int stages = (kp / 64 + 1) / 2;
        ASSERT_TRUE(S == 1 || S == 2 || S == 4 || S == 8) << S;
        if (S > 1) {
          EXPECT_GE(stages / S, 4) << np << "x" << kp << " M=" << M << " S=" << S;  // every block keeps 4 stages
          EXPECT_LT(blocks * (S / 2), sms) << np << "x" << kp << " M=" << M;      // the smaller split left SMs idle
        }
        if (S < 8) {  // a larger split would fill more SMs and keep 4 stages per block: it should have been taken
          EXPECT_TRUE(blocks * S >= sms || stages < 8 * S) << np << "x" << kp << " M=" << M << " S=" << S;
        }
      }
    }
  }
  if (sms == 132) {
    EXPECT_EQ(cuda::tiled_gemm_split_for(2560, 64, 2560), 4);   // o
    EXPECT_EQ(cuda::tiled_gemm_split_for(3840, 64, 2560), 4);   // qkv
    EXPECT_EQ(cuda::tiled_gemm_split_for(2560, 64, 6912), 8);   // down
    EXPECT_EQ(cuda::tiled_gemm_split_for(13824, 64, 2560), 2);  // gate_up
  }
}

// Integer GEMVs (dp4a with 8, 16 and 32 lanes per row; int8 MMA with 4 and 8 warps per 16 rows), the GEMMs (int8
// MMA; on sm_90 the tiled GEMM with its K split over 1-8 blocks of a cluster, partial token tiles and stages, more
// blocks than stages) and the automatic choice against a scalar int32 reference.
TEST(CudaKernels, TernaryMatmulExactRandomRagged) {
  REQUIRE_GPU();
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> xd(-128, 127);
  struct Shape { int n, k; };
  for (Shape sh : {Shape{1, 1}, Shape{37, 100}, Shape{64, 64}, Shape{200, 640}, Shape{130, 2560}, Shape{515, 1000}}) {
    const auto w = random_ternary(rng, sh.n, sh.k, 0.3);
    const auto s = cuda::Tc2Shape::of(sh.n, sh.k);
    DevBuf<uint32_t> dw(cuda::pack_tc2(w.data(), sh.n, sh.k));
    for (int M : {1, 2, 3, 4, 5, 8, 13, 16, 17, 33, 64, 100, 257}) {
      std::vector<int8_t> x(static_cast<size_t>(M) * sh.k), xp(static_cast<size_t>(M) * s.kp, 0);
      std::vector<int32_t> sum(M, 0), ref(static_cast<size_t>(M) * sh.n);
      for (int m = 0; m < M; ++m)
        for (int k = 0; k < sh.k; ++k) {
          const int v = xd(rng);
          x[m * sh.k + k] = xp[m * s.kp + k] = static_cast<int8_t>(v);
          sum[m] += v;
        }
      for (int m = 0; m < M; ++m)
        for (int n = 0; n < sh.n; ++n) {
          int32_t a = 0;
          for (int k = 0; k < sh.k; ++k) a += static_cast<int32_t>(x[m * sh.k + k]) * w[static_cast<size_t>(n) * sh.k + k];
          ref[static_cast<size_t>(m) * sh.n + n] = a;
        }
      DevBuf<int8_t> dx(xp);
      DevBuf<int32_t> ds(sum);
      using K = cuda::TernaryKernel;
      std::vector<std::pair<K, int>> variants = {{K::kMmaGemm, 0}, {K::kAuto, 0}};  // (kernel, lanes_or_warps)
      if (cuda::tiled_gemm_supported())  // K split over clusters of 1, 2, 4, 8 blocks and the automatic choice
        variants.insert(variants.end(), {{K::kTiledGemm, 0}, {K::kTiledGemm, 1}, {K::kTiledGemm, 2},
                                         {K::kTiledGemm, 4}, {K::kTiledGemm, 8}});
      if (M <= 16)
        variants.insert(variants.end(), {{K::kDp4aGemv, 8}, {K::kDp4aGemv, 16}, {K::kDp4aGemv, 32},
                                         {K::kMmaGemv, 4}, {K::kMmaGemv, 8}});
      for (auto [kernel, lw] : variants) {
        DevBuf<int32_t> acc(static_cast<size_t>(M) * sh.n);
        cuda::ternary_matmul_i32(dw.p, sh.n, static_cast<int>(s.np), static_cast<int>(s.kp), dx.p, ds.p, M, acc.p,
                                 nullptr, kernel, lw);
        EXPECT_EQ(acc.down(), ref) << sh.n << "x" << sh.k << " M=" << M << " kernel " << static_cast<int>(kernel)
                                   << " lanes_or_warps " << lw;
      }
    }
  }
}

// The tcb GEMV/GEMM (binary tensor-core MMA) for 1..100 tokens and every K split against a scalar int32
// reference, with activation planes from the host packer; tcb_planes and norm_quant's planes output (vector and
// fallback paths) equal the host packer's planes.
TEST(CudaKernels, TcbMatmulExactRandomRagged) {
  REQUIRE_GPU();
  if (!cuda::tcb_supported()) GTEST_SKIP() << "device below sm_80: no binary MMA";
  std::mt19937 rng(23);
  std::uniform_int_distribution<int> xd(-128, 127);
  struct Shape { int n, k; };
  for (Shape sh : {Shape{1, 1}, Shape{37, 100}, Shape{64, 256}, Shape{200, 640}, Shape{130, 2560}, Shape{515, 1000},
                   Shape{33, 6912}}) {
    const auto w = random_ternary(rng, sh.n, sh.k, 0.3);
    const auto s = cuda::TcbShape::of(sh.n, sh.k);
    const auto t = cuda::pack_tcb(w.data(), sh.n, sh.k);
    DevBuf<uint32_t> dw(t.words);
    DevBuf<int32_t> dneg(t.neg_count);
    {  // the rewrite as tc2 of the path of rows of more than one token (kp kept, rows padded to 64)
      const int np2 = (sh.n + 63) / 64 * 64;
      DevBuf<uint32_t> t2(static_cast<size_t>(np2) * s.kp / 16);
      cuda::tcb_to_tc2(dw.p, sh.n, static_cast<int>(s.kp), t2.p, np2, nullptr);
      const auto words = t2.down();
      std::vector<int8_t> wp(static_cast<size_t>(np2) * s.kp, 0);
      for (int r = 0; r < sh.n; ++r)
        for (int k = 0; k < sh.k; ++k) wp[static_cast<size_t>(r) * s.kp + k] = w[static_cast<size_t>(r) * sh.k + k];
      EXPECT_EQ(cuda::unpack_tc2(words.data(), np2, s.kp), wp) << "tcb_to_tc2 " << sh.n << "x" << sh.k;
    }
    for (int M : {1, 2, 3, 4, 5, 8, 13, 16, 17, 64, 100}) {
      std::vector<int8_t> x(static_cast<size_t>(M) * sh.k), xp(static_cast<size_t>(M) * s.kp, 0);
      std::vector<int32_t> ref(static_cast<size_t>(M) * sh.n);
      for (int m = 0; m < M; ++m)
        for (int k = 0; k < sh.k; ++k) x[m * sh.k + k] = xp[m * s.kp + k] = static_cast<int8_t>(xd(rng));
      for (int m = 0; m < M; ++m)
        for (int n = 0; n < sh.n; ++n) {
          int32_t a = 0;
          for (int k = 0; k < sh.k; ++k) a += static_cast<int32_t>(x[m * sh.k + k]) * w[static_cast<size_t>(n) * sh.k + k];
          ref[static_cast<size_t>(m) * sh.n + n] = a;
        }
      const auto planes = cuda::pack_tcb_activations(x.data(), M, sh.k);
      DevBuf<uint32_t> dxb(planes);
      DevBuf<int8_t> dq(xp);
      DevBuf<uint32_t> dxb2(planes.size());
      cuda::tcb_planes(dq.p, M, static_cast<int>(s.kp), dxb2.p, nullptr);
      ASSERT_EQ(dxb2.down(), planes) << "tcb_planes " << sh.n << "x" << sh.k << " M=" << M;
      for (int ksplit : {0, 1, 2, 3, 4}) {
        DevBuf<int32_t> acc(static_cast<size_t>(M) * sh.n);
        cuda::tcb_matmul_i32(dw.p, dneg.p, sh.n, static_cast<int>(s.kp), dxb.p, M, acc.p, nullptr, ksplit);
        EXPECT_EQ(acc.down(), ref) << sh.n << "x" << sh.k << " M=" << M << " ksplit " << ksplit;
      }
    }
  }
  DevBuf<int32_t> acc(1);
  EXPECT_THROW(cuda::tcb_matmul_i32(nullptr, nullptr, 1, 100, nullptr, 1, acc.p, nullptr), Error);  // kp % 256
  EXPECT_THROW(cuda::tcb_matmul_i32(nullptr, nullptr, 1, 256, nullptr, 1, acc.p, nullptr, 5), Error);
}

// The backend's path of rows of more than one token over tcb weights: tcb_to_tc2 into one scratch buffer, then
// ternary_matmul reading it (weights_from_stream), projection after projection on a stream with programmatic
// dependent launch, plain and captured in a graph. The sums equal the scalar reference for the MMA GEMV (2 and 16
// tokens) and the GEMM (40): a GEMV that read the scratch before the rewrite finished would see the previous
// projection's weights.
TEST(CudaKernels, TcbRewriteThenTc2OnDependentStream) {
  REQUIRE_GPU();
  if (!cuda::tcb_supported()) GTEST_SKIP() << "device below sm_80: no binary MMA";
  std::mt19937 rng(53);
  std::uniform_int_distribution<int> xd(-128, 127);
  const int n = 1024, k = 1536, projections = 4, np2 = (n + 63) / 64 * 64;
  const auto s = cuda::TcbShape::of(n, k);
  std::vector<std::vector<int8_t>> w;
  std::vector<std::unique_ptr<DevBuf<uint32_t>>> dw;
  for (int p = 0; p < projections; ++p) {
    w.push_back(random_ternary(rng, n, k, 0.3));
    dw.push_back(std::make_unique<DevBuf<uint32_t>>(cuda::pack_tcb(w.back().data(), n, k).words));
  }
  DevBuf<uint32_t> scratch(static_cast<size_t>(np2) * s.kp / 16);
  cudaStream_t st;
  cuda::check(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), "stream");
  const bool pdl_was = cuda::dependent_launch();
  cuda::set_dependent_launch(true);
  for (int M : {2, 16, 40}) {
    std::vector<int8_t> xp(static_cast<size_t>(M) * s.kp, 0);
    std::vector<int32_t> sum(M, 0);
    for (int m = 0; m < M; ++m)
      for (int c = 0; c < k; ++c) {
        const int v = xd(rng);
        xp[static_cast<size_t>(m) * s.kp + c] = static_cast<int8_t>(v);
        sum[m] += v;
      }
    std::vector<std::vector<int32_t>> ref(projections, std::vector<int32_t>(static_cast<size_t>(M) * n));
    for (int p = 0; p < projections; ++p)
      for (int m = 0; m < M; ++m)
        for (int r = 0; r < n; ++r) {
          int32_t a = 0;
          for (int c = 0; c < k; ++c)
            a += static_cast<int32_t>(xp[static_cast<size_t>(m) * s.kp + c]) * w[p][static_cast<size_t>(r) * k + c];
          ref[p][static_cast<size_t>(m) * n + r] = a;
        }
    DevBuf<int8_t> dx(xp);
    DevBuf<int32_t> ds(sum);
    std::vector<std::unique_ptr<DevBuf<int32_t>>> acc;
    for (int p = 0; p < projections; ++p) acc.push_back(std::make_unique<DevBuf<int32_t>>(static_cast<size_t>(M) * n));
    auto body = [&] {
      for (int p = 0; p < projections; ++p) {
        cuda::tcb_to_tc2(dw[p]->p, n, static_cast<int>(s.kp), scratch.p, np2, st);
        cuda::ternary_matmul_i32(scratch.p, n, np2, static_cast<int>(s.kp), dx.p, ds.p, M, acc[p]->p, st,
                                 cuda::TernaryKernel::kAuto, 0, /*weights_from_stream=*/true);
      }
    };
    for (bool graph : {false, true}) {
      for (auto& a : acc) cuda::check(cudaMemset(a->p, 0, a->n * sizeof(int32_t)), "memset");
      if (graph) {
        cudaGraph_t g = nullptr;
        cudaGraphExec_t ge = nullptr;
        cuda::check(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal), "capture");
        body();
        cuda::check(cudaStreamEndCapture(st, &g), "end capture");
        cuda::check(cudaGraphInstantiate(&ge, g, 0), "instantiate");
        cuda::check(cudaGraphLaunch(ge, st), "graph launch");
        cuda::check(cudaStreamSynchronize(st), "sync");
        cudaGraphExecDestroy(ge);
        cudaGraphDestroy(g);
      } else {
        body();
        cuda::check(cudaStreamSynchronize(st), "sync");
      }
      for (int p = 0; p < projections; ++p)
        EXPECT_EQ(acc[p]->down(), ref[p]) << "M=" << M << " projection " << p << (graph ? " (graph)" : "");
    }
  }
  cuda::set_dependent_launch(pdl_was);
  cudaStreamDestroy(st);
}

// norm_quant / glu_norm_quant with the planes output: the planes equal the host packer's planes of the q they
// write (the one-kernel vector path, and the fallback path of a row length that is not a multiple of 4), and the
// whole tcb projection equals TernaryLinear::forward on the CPU bit for bit.
TEST(CudaKernels, TcbProjectionAndPlanesBitExactVsCpu) {
  REQUIRE_GPU();
  if (!cuda::tcb_supported()) GTEST_SKIP() << "device below sm_80: no binary MMA";
  std::mt19937 rng(29);
  for (int k : {320, 2560, 6912, 301}) {
    const int n = kProjRows;
    const auto w = random_ternary(rng, n, k);
    const TernaryLinear lin = segmented_linear(w, k);
    const auto s = cuda::TcbShape::of(n, k);
    const auto t = cuda::pack_tcb(w.data(), n, k);
    DevBuf<uint32_t> dw(t.words);
    DevBuf<int32_t> dneg(t.neg_count);
    for (int M : {1, 4, 16, 33}) {
      const auto x = random_floats(rng, static_cast<size_t>(M) * k, 2.0f);
      std::vector<float> ref(static_cast<size_t>(M) * n), base = random_floats(rng, static_cast<size_t>(M) * n);
      lin.forward(x.data(), M, ref.data());
      DevBuf<float> dx(x), dy(static_cast<size_t>(M) * n), dadd(base), inv(M);
      DevBuf<int8_t> q(static_cast<size_t>(M) * s.kp);
      DevBuf<int32_t> sq(M);
      DevBuf<uint32_t> xb(static_cast<size_t>(M) * s.kp / 4);
      cuda::norm_quant(dx.p, k, nullptr, nullptr, M, k, 1e-6f, nullptr, q.p, static_cast<int>(s.kp), inv.p, sq.p,
                       nullptr, xb.p);
      const auto qh = q.down();
      std::vector<int8_t> qk(static_cast<size_t>(M) * k);
      for (int m = 0; m < M; ++m)
        for (int c = 0; c < k; ++c) qk[m * k + c] = qh[m * s.kp + c];
      ASSERT_EQ(xb.down(), cuda::pack_tcb_activations(qk.data(), M, k)) << "k=" << k << " M=" << M;
      cuda::TernaryEpilogue ep = segmented_epilogue(dy.p);
      cuda::tcb_matmul(dw.p, dneg.p, n, static_cast<int>(s.kp), xb.p, inv.p, M, ep, nullptr);
      EXPECT_EQ(dy.down(), ref) << "k=" << k << " M=" << M;
      ep.y = dadd.p, ep.add = true;
      cuda::tcb_matmul(dw.p, dneg.p, n, static_cast<int>(s.kp), xb.p, inv.p, M, ep, nullptr, 2);
      auto got = dadd.down();
      for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], base[i] + ref[i]) << i;
    }
  }
  // glu_norm_quant's planes (relu^2 GLU + sub-norm, the down projection's input) equal those of its q.
  const int I = 6912, M = 3;
  const auto gu = random_floats(rng, static_cast<size_t>(M) * 2 * I, 1.5f), nw = random_floats(rng, I, 1.0f);
  DevBuf<float> dgu(gu), dnw(nw), act(static_cast<size_t>(M) * I), inv(M);
  DevBuf<int8_t> q(static_cast<size_t>(M) * I);
  DevBuf<int32_t> sq(M);
  DevBuf<uint32_t> xb(static_cast<size_t>(M) * I / 4);
  cuda::glu_norm_quant(dgu.p, M, I, true, dnw.p, 1e-5f, act.p, q.p, I, inv.p, sq.p, nullptr, xb.p);
  const auto qh = q.down();
  EXPECT_EQ(xb.down(), cuda::pack_tcb_activations(qh.data(), M, I));
}

// The whole ternary projection (quantize + matmul + per-segment dequantization, plain and residual-add) equals
// TernaryLinear::forward on the CPU bit for bit, for every kernel of the token count: the GEMVs, the 64 x 64 GEMM
// and the tiled GEMM with each K split. The output rows are 328 (stride 328: the tiled GEMM's float4 stores), 325 in
// a stride of 328 (float4 stores but the last rows one by one) and 330 (stride 330: one by one).
TEST(CudaKernels, TernaryProjectionBitExactVsCpu) {
  REQUIRE_GPU();
  std::mt19937 rng(5);
  const int k = 320;
  struct Out { int n, ldy; };
  for (Out o : {Out{kProjRows, kProjRows}, Out{325, 328}, Out{330, 330}}) {
    const int n = o.n;
    const auto w = random_ternary(rng, n, k);
    const TernaryLinear lin = segmented_linear(w, k, n);
    const auto s = cuda::Tc2Shape::of(n, k);
    DevBuf<uint32_t> dw(cuda::pack_tc2(w.data(), n, k));
    for (int M : {1, 4, 16, 33, 100}) {
      const auto x = random_floats(rng, static_cast<size_t>(M) * k, 2.0f);
      std::vector<float> ref(static_cast<size_t>(M) * n), base = random_floats(rng, static_cast<size_t>(M) * o.ldy);
      lin.forward(x.data(), M, ref.data());
      const DeviceQuantized in(x, M, k, static_cast<int>(s.kp));
      const auto& q = in.q;
      const auto& inv = in.inv;
      const auto& sq = in.sq;
      // y as the CPU computes it: the reference (+ the old y when add), rows past n untouched.
      auto expect_y = [&](const std::vector<float>& got, bool add, const std::string& what) {
        for (int m = 0; m < M; ++m)
          for (int r = 0; r < o.ldy; ++r) {
            const size_t i = static_cast<size_t>(m) * o.ldy + r;
            const float want = r >= n ? base[i] : add ? base[i] + ref[static_cast<size_t>(m) * n + r]
                                                      : ref[static_cast<size_t>(m) * n + r];
            ASSERT_EQ(got[i], want) << what << " n=" << n << " M=" << M << " add " << add << " at " << m << "," << r;
          }
      };
      using K = cuda::TernaryKernel;
      std::vector<std::pair<K, int>> variants = {{K::kAuto, 0}, {K::kMmaGemm, 0}};
      if (cuda::tiled_gemm_supported())
        for (int split : {1, 2, 4, 8}) variants.push_back({K::kTiledGemm, split});
      for (auto [kernel, lw] : variants) {
        for (bool add : {false, true}) {
          DevBuf<float> dy(base);
          cuda::TernaryEpilogue ep = segmented_epilogue(dy.p, n, o.ldy);
          ep.add = add;
          cuda::ternary_matmul(dw.p, n, static_cast<int>(s.np), static_cast<int>(s.kp), q.p, sq.p, inv.p, M, ep,
                               nullptr, kernel, lw);
          expect_y(dy.down(), add,
                   "kernel " + std::to_string(static_cast<int>(kernel)) + " split " + std::to_string(lw));
        }
      }
      // The int8 copy (CudaOptions::gemm_weights "int8"): cuBLASLt's int8 GEMM over [np16, kp] codes on M rounded up
      // to 16 rows, then ternary_epilogue: the same bits, unsplit and with K split into 2-6 strided-batch parts (each
      // of cuBLASLt's candidates), the epilogue adding the parts.
      if (M < 17) continue;
      const int np16 = (n + 15) / 16 * 16, Mp = (M + 15) / 16 * 16;
      std::vector<int8_t> w8(static_cast<size_t>(np16) * s.kp, 0);
      for (int r = 0; r < n; ++r)
        for (int c = 0; c < k; ++c) w8[static_cast<size_t>(r) * s.kp + c] = w[static_cast<size_t>(r) * k + c];
      DevBuf<int8_t> dw8(w8), q16(static_cast<size_t>(Mp) * s.kp);
      ASSERT_EQ(cudaMemcpy(q16.p, q.p, static_cast<size_t>(M) * s.kp, cudaMemcpyDeviceToDevice), cudaSuccess);
      const int64_t stride = cuda::Int8Workspace::part_stride(M, np16);
      DevBuf<int32_t> acc(6 * static_cast<size_t>(stride));
      cuda::Int8Workspace ws;
      int configs = 0;
      for (int splits : {1, 2, 3, 4, 6}) {
        if (s.kp % (16 * splits)) {
          EXPECT_THROW(ws.gemm(dw8.p, np16, static_cast<int>(s.kp), q16.p, M, acc.p, np16, nullptr, 2, {splits, 0}),
                       Error);
          continue;
        }
        const int algos = ws.algo_count(np16, static_cast<int>(s.kp), M, np16, splits);
        if (splits == 1) {
          ASSERT_GT(algos, 0);
        }
        for (int algo = 0; algo < algos; ++algo) {
          ++configs;
          ASSERT_EQ(cudaMemset(acc.p, 0x5a, acc.n * sizeof(int32_t)), cudaSuccess);
          ws.gemm(dw8.p, np16, static_cast<int>(s.kp), q16.p, M, acc.p, np16, nullptr, 2, {splits, algo});
          for (bool add : {false, true}) {
            DevBuf<float> dy(base);
            cuda::TernaryEpilogue ep = segmented_epilogue(dy.p, n, o.ldy);
            ep.add = add;
            cuda::ternary_epilogue(acc.p, np16, M, n, inv.p, ep, nullptr, splits, stride);
            expect_y(dy.down(), add, "int8 copy splits " + std::to_string(splits) + " algo " + std::to_string(algo));
          }
        }
      }
      EXPECT_GT(configs, 1) << "n=" << n << " M=" << M;
    }
  }
}

// The group-scaled ternary GEMM (Ternary Bonsai: a scale per row per 128 k) equals the CPU's TernaryLinear with
// group scales bit for bit: K a multiple of 128, one ending in half a group (64), one padded inside a piece and one
// of 33 groups (several rounds of the dp4a kernel); tokens through the dp4a kernel (up to 8, one and two groups per
// round) and the tensor-core one (every warp tiling, full and ragged token tiles, from one token), so a token's
// floats do not depend on the batch; rows past n and past ldy untouched; stored, added (the residual) and with a
// bias. Scales of mixed magnitude so the float sum's order shows in the last bits.
TEST(CudaKernels, GroupScaledTernaryBitExactVsCpu) {
  REQUIRE_GPU();
  std::mt19937 rng(11);
  struct Shape { int n, k, ldy; };
  for (Shape sh : {Shape{80, 512, 80}, Shape{70, 320, 72}, Shape{33, 1000, 40}, Shape{40, 4160, 48}}) {
    const int n = sh.n, k = sh.k, G = (k + 127) / 128;
    const auto w = random_ternary(rng, n, k);
    std::vector<float> gs(static_cast<size_t>(n) * G);
    std::uniform_real_distribution<float> mag(-6.0f, 2.0f);
    for (float& g : gs) g = std::exp2(mag(rng)) * (rng() % 5 == 0 ? -1.0f : 1.0f);
    const auto bias = random_floats(rng, static_cast<size_t>(n), 0.5f);
    const auto s = cuda::Tc2Shape::of(n, k);
    DevBuf<uint32_t> dw(cuda::pack_tc2(w.data(), n, k));
    DevBuf<float> dgs(gs), dbias(bias);
    for (bool with_bias : {false, true}) {
      TernaryLinear lin(pack_ternary(TernaryFormat::kI2, w.data(), n, k), gs);
      if (with_bias) lin.set_bias(bias);
      for (int M : {1, 2, 3, 8, 9, 13, 16, 40, 65, 100}) {
        const auto x = random_floats(rng, static_cast<size_t>(M) * k, 2.0f);
        std::vector<float> ref(static_cast<size_t>(M) * n), base = random_floats(rng, static_cast<size_t>(M) * sh.ldy);
        lin.forward(x.data(), M, ref.data());
        const DeviceQuantized in(x, M, k, static_cast<int>(s.kp));
        const auto& q = in.q;
        const auto& inv = in.inv;
        // Every kernel and tiling (0, 0: the automatic one): up to 8 tokens the dp4a kernel's groups per lane and
        // round (d, 0), at any M the tensor-core kernel's warp tiles.
        std::vector<std::pair<int, int>> tiles = {{0, 0}, {1, 1}, {1, 2}, {1, 4}, {2, 1}, {2, 2}, {2, 4}};
        if (M <= 8) tiles.insert(tiles.end(), {{1, 0}, {2, 0}});
        for (auto [tm, nt] : tiles)
        for (bool add : {false, true}) {
          DevBuf<float> dy(base);
          cuda::TernaryEpilogue ep;
          ep.y = dy.p, ep.ldy = sh.ldy, ep.add = add;
          cuda::ternary_grouped_matmul(dw.p, dgs.p, with_bias ? dbias.p : nullptr, n, static_cast<int>(s.np), k,
                                       static_cast<int>(s.kp), q.p, inv.p, M, ep, nullptr, tm, nt);
          const auto got = dy.down();
          for (int m = 0; m < M; ++m)
            for (int r = 0; r < sh.ldy; ++r) {
              const size_t i = static_cast<size_t>(m) * sh.ldy + r;
              const float r_ = r < n ? ref[static_cast<size_t>(m) * n + r] : 0.0f;
              const float want = r >= n ? base[i] : add ? base[i] + r_ : r_;
              ASSERT_EQ(got[i], want) << "n=" << n << " k=" << k << " M=" << M << " tiles " << tm << "x" << nt
                                      << " bias " << with_bias << " add " << add << " at " << m << "," << r;
            }
        }
      }
    }
  }
  DevBuf<float> y(4);
  cuda::TernaryEpilogue ep;
  ep.y = y.p, ep.ldy = 4;
  EXPECT_THROW(cuda::ternary_grouped_matmul(nullptr, y.p, nullptr, 4, 64, 128, 128, nullptr, y.p, 1, ep, nullptr),
               Error);
  // Tilings the kernels do not have: the dp4a kernel past 8 tokens, 3 groups per round, a warp tile of 3 rows.
  DevBuf<uint32_t> w16(16 * 8);
  DevBuf<float> g16(16), inv16(16), y16(16 * 16);
  DevBuf<int8_t> x16(16 * 128);
  ep.y = y16.p, ep.ldy = 16;
  for (auto [M, a, b] : {std::tuple{9, 1, 0}, {1, 3, 0}, {1, 1, 3}})
    EXPECT_THROW(cuda::ternary_grouped_matmul(w16.p, g16.p, nullptr, 16, 16, 128, 128, x16.p, inv16.p, M, ep, nullptr,
                                              a, b),
                 Error)
        << M << " tokens, tiles " << a << "x" << b;
}

// BITCOS GEMV: int32 sums equal the scalar reference exactly, and the dequantized projection (plain and
// residual-add, three segments) equals the tc2 ternary_matmul bit for bit.
TEST(CudaKernels, BitcosGemvExactAndBitIdenticalToTc2) {
  REQUIRE_GPU();
  std::mt19937 rng(17);
  std::uniform_int_distribution<int> xd(-128, 127);
  struct Shape { int n, k; };
  for (double z : {0.0, 0.36, 0.9}) {
    for (Shape sh : {Shape{1, 1}, Shape{37, 100}, Shape{64, 64}, Shape{5, 2049}, Shape{130, 2560}, Shape{515, 1000},
                     Shape{33, 6912}}) {
      const auto w = random_ternary(rng, sh.n, sh.k, z);
      const auto b = cuda::pack_bitcos_gpu(w.data(), sh.n, sh.k);
      const auto s = cuda::Tc2Shape::of(sh.n, sh.k);
      ASSERT_EQ(b.kp, s.kp);
      DevBuf<uint32_t> dm(b.masks), dro(b.row_offsets), dsg(b.signs), dw(cuda::pack_tc2(w.data(), sh.n, sh.k));
      for (int M : {1, 2, 3, 5, 8}) {
        std::vector<int8_t> xp(static_cast<size_t>(M) * s.kp, 0);
        std::vector<int32_t> sum(M, 0), ref(static_cast<size_t>(M) * sh.n);
        std::vector<float> inv(M);
        for (int m = 0; m < M; ++m) {
          for (int k = 0; k < sh.k; ++k) {
            const int v = xd(rng);
            xp[static_cast<size_t>(m) * s.kp + k] = static_cast<int8_t>(v);
            sum[m] += v;
          }
          inv[m] = 0.0037f * static_cast<float>(m + 1);
        }
        for (int m = 0; m < M; ++m)
          for (int n = 0; n < sh.n; ++n) {
            int32_t a = 0;
            for (int k = 0; k < sh.k; ++k)
              a += static_cast<int32_t>(xp[static_cast<size_t>(m) * s.kp + k]) * w[static_cast<size_t>(n) * sh.k + k];
            ref[static_cast<size_t>(m) * sh.n + n] = a;
          }
        DevBuf<int8_t> dx(xp);
        DevBuf<int32_t> ds(sum);
        DevBuf<float> dinv(inv);
        DevBuf<int32_t> acc(static_cast<size_t>(M) * sh.n);
        cuda::ternary_bitcos_gemv_i32(dm.p, dro.p, dsg.p, sh.n, static_cast<int>(b.kp), dx.p, M, acc.p, nullptr);
        EXPECT_EQ(acc.down(), ref) << sh.n << "x" << sh.k << " M=" << M << " z=" << z;
        cuda::TernaryEpilogue ep;
        ep.seg_end[0] = sh.n / 3, ep.seg_end[1] = sh.n / 2, ep.seg_end[2] = sh.n;
        ep.seg_scale[0] = 0.37f, ep.seg_scale[1] = 1.9f, ep.seg_scale[2] = 0.05f;
        ep.ldy = sh.n;
        const auto base = random_floats(rng, static_cast<size_t>(M) * sh.n);
        for (bool add : {false, true}) {
          DevBuf<float> y1(base), y2(base);
          ep.add = add;
          ep.y = y1.p;
          cuda::ternary_matmul(dw.p, sh.n, static_cast<int>(s.np), static_cast<int>(s.kp), dx.p, ds.p, dinv.p, M, ep,
                               nullptr);
          ep.y = y2.p;
          cuda::ternary_bitcos_gemv(dm.p, dro.p, dsg.p, sh.n, static_cast<int>(b.kp), dx.p, dinv.p, M, ep, nullptr);
          const auto a1 = y1.down(), a2 = y2.down();
          ASSERT_EQ(a1.size(), a2.size());
          EXPECT_EQ(std::memcmp(a1.data(), a2.data(), a1.size() * sizeof(float)), 0)
              << sh.n << "x" << sh.k << " M=" << M << " z=" << z << " add=" << add;
        }
      }
    }
  }
  EXPECT_THROW(cuda::ternary_bitcos_gemv_i32(nullptr, nullptr, nullptr, 4, 64, nullptr, 9, nullptr, nullptr), Error);
  EXPECT_THROW(cuda::ternary_bitcos_gemv_i32(nullptr, nullptr, nullptr, 4, 100, nullptr, 1, nullptr, nullptr), Error);
}

// Quantization alone is exact; RMSNorm within 1e-6 relative, and its quantization exact given its output.
TEST(CudaKernels, NormQuantVsCpu) {
  REQUIRE_GPU();
  std::mt19937 rng(3);
  // D = 1 and 8200: the general kernel; the others the one-block-per-row vector kernel (ragged last float4s).
  for (auto [M, D] : std::vector<std::pair<int, int>>{{1, 1}, {3, 100}, {7, 2560}, {2, 6912}, {1, 4100}, {2, 8200}}) {
    const int kp = (D + 63) / 64 * 64;
    auto x = random_floats(rng, static_cast<size_t>(M) * D, 3.0f);
    x[0] = 0.5f * 127.0f / 127.0f;  // a few exact halves appear after scaling in random data anyway
    const auto wt = random_floats(rng, D, 1.0f);
    DevBuf<float> dx(x), dw(wt), dy(static_cast<size_t>(M) * D), inv(M);
    DevBuf<int8_t> q(static_cast<size_t>(M) * kp);
    DevBuf<int32_t> sq(M);
    // plain quantization
    cuda::norm_quant(dx.p, D, nullptr, nullptr, M, D, 1e-6f, nullptr, q.p, kp, inv.p, sq.p, nullptr);
    std::vector<int8_t> rq(static_cast<size_t>(M) * D);
    std::vector<float> rinv(M);
    cpu::quantize_rows_absmax_i8(x.data(), M, D, rq.data(), rinv.data());
    auto gq = q.down();
    auto ginv = inv.down();
    auto gs = sq.down();
    for (int m = 0; m < M; ++m) {
      int32_t sum = 0;
      for (int d = 0; d < kp; ++d) {
        const int want = d < D ? rq[m * D + d] : 0;
        ASSERT_EQ(gq[m * kp + d], want) << m << "," << d;
        sum += want;
      }
      EXPECT_EQ(ginv[m], rinv[m]);
      EXPECT_EQ(gs[m], sum);
    }
    // RMSNorm + quantization
    cuda::norm_quant(dx.p, D, nullptr, dw.p, M, D, 1e-6f, dy.p, q.p, kp, inv.p, sq.p, nullptr);
    std::vector<float> ry(static_cast<size_t>(M) * D);
    cpu::rms_norm(x.data(), wt.data(), ry.data(), M, D, 1e-6f);
    auto gy = dy.down();
    for (size_t i = 0; i < gy.size(); ++i) ASSERT_NEAR(gy[i], ry[i], 1e-6 * std::fabs(ry[i]) + 1e-7) << i;
    cpu::quantize_rows_absmax_i8(gy.data(), M, D, rq.data(), rinv.data());
    gq = q.down();
    for (int m = 0; m < M; ++m)
      for (int d = 0; d < D; ++d) ASSERT_EQ(gq[m * kp + d], rq[m * D + d]);
  }
}

// RoPE + paged KV write exactly as cpu::rope_apply; attention within 1e-5 relative of cpu::attention_causal,
// over a shuffled block table and ragged lengths (prefill chunk and decode rows of two sequences).
TEST(CudaKernels, RopeKvAttentionVsCpu) {
  REQUIRE_GPU();
  std::mt19937 rng(9);
  for (int D : {64, 128}) {
    const int H = 4, KVH = 2, bs = 16, nblocks = 20, maxpos = 300, half = D / 2;
    const int qd = H * D, kvd = KVH * D, w = qd + 2 * kvd;
    std::vector<float> ct(static_cast<size_t>(maxpos) * half), st(ct.size());
    for (size_t i = 0; i < ct.size(); ++i) {
      ct[i] = std::cos(0.01f * static_cast<float>(i));
      st[i] = std::sin(0.01f * static_cast<float>(i));
    }
    // Sequence 0: prefill of 37 tokens at 0; sequence 1: 150 tokens at 0 then checked rows.
    std::vector<int32_t> blocks(nblocks);
    for (int i = 0; i < nblocks; ++i) blocks[i] = i;
    std::shuffle(blocks.begin(), blocks.end(), rng);
    const int btw = 10;
    std::vector<int32_t> bt(2 * btw);
    for (int i = 0; i < btw; ++i) bt[i] = blocks[i], bt[btw + i] = blocks[btw + i];
    const int T0 = 37, T1 = 150;
    const int rows = T0 + T1;
    std::vector<int32_t> pos(rows), seq(rows);
    for (int r = 0; r < rows; ++r) {
      seq[r] = r < T0 ? 0 : 1;
      pos[r] = r < T0 ? r : r - T0;
    }
    auto qkv = random_floats(rng, static_cast<size_t>(rows) * w);
    DevBuf<float> dqkv(qkv), dct(ct), dst(st), kpool(static_cast<size_t>(nblocks) * bs * kvd),
        vpool(static_cast<size_t>(nblocks) * bs * kvd), out(static_cast<size_t>(rows) * qd);
    DevBuf<int32_t> dpos(pos), dseq(seq), dbt(bt);
    cuda::rope_kv_write(dqkv.p, rows, H, KVH, D, dct.p, dst.p, dpos.p, dseq.p, dbt.p, btw, bs, kpool.p, vpool.p,
                        nullptr);
    cuda::attention_paged(dqkv.p, w, rows, H, KVH, D, dpos.p, dseq.p, dbt.p, btw, bs, kpool.p, vpool.p, out.p,
                          nullptr);
    // CPU reference
    std::vector<float> ref = qkv;
    for (int r = 0; r < rows; ++r) {
      float* row = &ref[static_cast<size_t>(r) * w];
      cpu::rope_apply(row, H, D, &ct[static_cast<size_t>(pos[r]) * half], &st[static_cast<size_t>(pos[r]) * half]);
      cpu::rope_apply(row + qd, KVH, D, &ct[static_cast<size_t>(pos[r]) * half],
                      &st[static_cast<size_t>(pos[r]) * half]);
    }
    EXPECT_EQ(dqkv.down(), ref) << "rope D=" << D;
    auto kp = kpool.down(), vp = vpool.down();
    auto got = out.down();
    for (int s = 0; s < 2; ++s) {
      const int T = s == 0 ? T0 : T1, r0 = s == 0 ? 0 : T0;
      std::vector<float> q(static_cast<size_t>(T) * qd), k(static_cast<size_t>(T) * kvd), v(k.size()),
          o(static_cast<size_t>(T) * qd);
      for (int t = 0; t < T; ++t) {
        const float* row = &ref[static_cast<size_t>(r0 + t) * w];
        std::memcpy(&q[static_cast<size_t>(t) * qd], row, sizeof(float) * qd);
        const int64_t slot = (static_cast<int64_t>(bt[s * btw + t / bs]) * bs + t % bs) * kvd;
        for (int d = 0; d < kvd; ++d) {
          ASSERT_EQ(kp[slot + d], row[qd + d]) << "k cache";
          ASSERT_EQ(vp[slot + d], row[qd + kvd + d]) << "v cache";
          k[static_cast<size_t>(t) * kvd + d] = row[qd + d];
          v[static_cast<size_t>(t) * kvd + d] = row[qd + kvd + d];
        }
      }
      cpu::attention_causal(q.data(), k.data(), v.data(), o.data(), T, 0, H, KVH, D);
      double num = 0, den = 0;
      for (size_t i = 0; i < o.size(); ++i) {
        const double d = got[static_cast<size_t>(r0) * qd + i] - o[i];
        ASSERT_FALSE(std::isnan(got[static_cast<size_t>(r0) * qd + i]));
        num += d * d;
        den += static_cast<double>(o[i]) * o[i];
      }
      EXPECT_LT(std::sqrt(num / den), 1e-5) << "attention D=" << D << " seq " << s;
    }
  }
}

TEST(CudaKernels, GluEmbeddingBiasVsCpu) {
  REQUIRE_GPU();
  std::mt19937 rng(21);
  const int M = 5, I = 333;
  const auto gu = random_floats(rng, static_cast<size_t>(M) * 2 * I, 2.0f);
  DevBuf<float> dgu(gu), act(static_cast<size_t>(M) * I);
  std::vector<float> ref(static_cast<size_t>(M) * I);
  for (bool relu2 : {true, false}) {
    cuda::glu(dgu.p, M, I, relu2, act.p, nullptr);
    for (int m = 0; m < M; ++m) {
      const float* g = &gu[static_cast<size_t>(m) * 2 * I];
      if (relu2) cpu::relu2_mul(g, g + I, &ref[static_cast<size_t>(m) * I], I);
      else cpu::silu_mul(g, g + I, &ref[static_cast<size_t>(m) * I], I);
    }
    auto got = act.down();
    for (size_t i = 0; i < got.size(); ++i) {
      if (relu2) ASSERT_EQ(got[i], ref[i]) << i;
      else ASSERT_NEAR(got[i], ref[i], 4e-7 * std::fabs(ref[i]) + 1e-12) << i;
    }
  }
  const int V = 50, D = 70;
  const auto table = random_floats(rng, static_cast<size_t>(V) * D);
  std::vector<int32_t> toks = {3, 49, 0, 3};
  DevBuf<float> dt(table), x(toks.size() * D);
  DevBuf<int32_t> dtok(toks);
  cuda::embedding(dt.p, dtok.p, static_cast<int>(toks.size()), D, x.p, nullptr);
  auto gx = x.down();
  for (size_t r = 0; r < toks.size(); ++r)
    for (int d = 0; d < D; ++d) ASSERT_EQ(gx[r * D + d], table[static_cast<size_t>(toks[r]) * D + d]);
  const auto t = random_floats(rng, 3 * 7), b = random_floats(rng, 7), y0 = random_floats(rng, 3 * 7);
  DevBuf<float> dtt(t), db(b), dy(y0);
  cuda::bias_add(dtt.p, db.p, 3, 7, dy.p, true, nullptr);
  auto gy = dy.down();
  for (int i = 0; i < 21; ++i) ASSERT_EQ(gy[i], y0[i] + (t[i] + b[i % 7]));
}

// Pending sums of a K-split int8 GEMM (PendingSums::parts): the row kernels and ternary_epilogue add the parts and
// give the bits of the same sums in one part (float4 widths and the scalar fallback of an odd width).
// The embedding lookup over a table as the model stores it (bf16, GGUF Q2_0 in both block sizes, every code
// including 3) equals the CPU's Embedding::row bit for bit.
TEST(CudaKernels, StoredEmbeddingMatchesCpuRows) {
  REQUIRE_GPU();
  std::mt19937 rng(21);
  const int V = 37, D = 384;
  const std::vector<int32_t> tokens = {0, 36, 5, 5, 17, 2, 36};
  const int rows = static_cast<int>(tokens.size());
  DevBuf<int32_t> dtok(tokens);
  auto check = [&](const Embedding& e, const cuda::StoredEmbedding& t, const char* what) {
    DevBuf<float> x(static_cast<size_t>(rows) * D);
    cuda::embedding(t, dtok.p, rows, D, x.p, nullptr);
    const auto got = x.down();
    std::vector<float> want(D);
    for (int r = 0; r < rows; ++r) {
      e.row(tokens[r], want.data());
      for (int d = 0; d < D; ++d) ASSERT_EQ(got[static_cast<size_t>(r) * D + d], want[d]) << what << " " << r << "," << d;
    }
  };
  std::vector<uint16_t> b16(static_cast<size_t>(V) * D);
  for (auto& v : b16) v = f32_to_bf16(std::normal_distribution<float>(0, 1)(rng));
  DevBuf<uint16_t> db16(b16);
  check(Embedding::bf16(b16.data(), V, D), {cuda::StoredEmbedding::kBF16, db16.p, 0, 0}, "bf16");
  for (int block : {64, 128}) {
    const int bb = 2 + block / 4;
    std::vector<uint8_t> q(static_cast<size_t>(V) * D / block * bb);
    for (auto& b : q) b = static_cast<uint8_t>(rng());
    for (size_t i = 0; i < q.size(); i += bb) {  // finite scales: fp16 of a normal value
      const uint16_t h = f32_to_f16(std::normal_distribution<float>(0, 0.05f)(rng));
      std::memcpy(&q[i], &h, 2);
    }
    DevBuf<uint8_t> dq(q);
    check(Embedding::q2_0(q.data(), V, D, block, bb), {cuda::StoredEmbedding::kQ2_0, dq.p, block, bb},
          block == 64 ? "q2_0 64" : "q2_0 128");
  }
  DevBuf<float> x(static_cast<size_t>(rows) * D);
  EXPECT_THROW(cuda::embedding(cuda::StoredEmbedding{cuda::StoredEmbedding::kQ2_0, db16.p, 100, 27}, dtok.p, rows, D,
                               x.p, nullptr),
               Error);
}

TEST(CudaKernels, PendingSumsInPartsMatchOnePart) {
  REQUIRE_GPU();
  std::mt19937 rng(47);
  std::uniform_int_distribution<int> ad(-90000, 90000);
  for (auto [M, D] : std::vector<std::pair<int, int>>{{17, 2560}, {64, 6912}, {3, 333}}) {
    const int kp = (D + 63) / 64 * 64;
    for (bool glu : {false, true}) {
      const int width = glu ? 2 * D : D, ld = width + (D % 4 ? 1 : 4);
      const size_t n = static_cast<size_t>(M) * ld;
      const int64_t stride = static_cast<int64_t>(n) + 8;  // parts apart by more than a row block
      constexpr int kParts = 3;
      std::vector<int32_t> acc(n), parts(kParts * static_cast<size_t>(stride), 0);
      for (size_t i = 0; i < n; ++i) {
        acc[i] = ad(rng);
        const int32_t a = ad(rng), b = ad(rng);
        parts[i + stride] = a, parts[i + 2 * stride] = b, parts[i] = acc[i] - a - b;
      }
      std::vector<float> inv0(M);
      for (int m = 0; m < M; ++m) inv0[m] = 1e-4f * static_cast<float>(m + 3);
      const auto x0 = random_floats(rng, static_cast<size_t>(M) * (glu ? 2 * D : D), 2.0f);
      const auto nw = random_floats(rng, D, 1.0f);
      DevBuf<int32_t> dacc(acc), dparts(parts), sq(M), sq2(M);
      DevBuf<float> dnw(nw), act(static_cast<size_t>(M) * D), x(x0), inv(inv0), x2(x0), inv2(inv0);
      DevBuf<int8_t> q(static_cast<size_t>(M) * kp), q2(static_cast<size_t>(M) * kp);
      cuda::PendingSums p;
      p.ldacc = ld;
      p.ep.seg_end[0] = glu ? D : D / 3;
      p.ep.seg_end[1] = glu ? 2 * D : D / 2;
      p.ep.seg_end[2] = width;
      p.ep.seg_scale[0] = 0.37f, p.ep.seg_scale[1] = 1.9f, p.ep.seg_scale[2] = 0.05f;
      p.ep.ldy = glu ? 2 * D : D;
      p.ep.add = !glu;
      auto run = [&](const int32_t* a, int np, float* xs, float* is, int8_t* qs, int32_t* ss) {
        cuda::PendingSums r = p;
        r.acc = a, r.parts = np, r.part_stride = np > 1 ? stride : 0, r.inv_s = is, r.ep.y = xs;
        if (glu) cuda::glu_norm_quant_sums(r, M, D, true, dnw.p, 1e-6f, act.p, qs, kp, is, ss, nullptr);
        else cuda::residual_norm_quant(r, M, D, dnw.p, 1e-6f, qs, kp, is, ss, nullptr);
      };
      run(dparts.p, kParts, x.p, inv.p, q.p, sq.p);
      run(dacc.p, 1, x2.p, inv2.p, q2.p, sq2.p);
      const std::string what = "M=" + std::to_string(M) + " D=" + std::to_string(D) + " glu " + std::to_string(glu);
      if (!glu) {  // the residual stream (the GLU of parts runs ternary_epilogue into gate_up's output first)
        ASSERT_EQ(x.down(), x2.down()) << what;
      }
      ASSERT_EQ(q.down(), q2.down()) << what;
      ASSERT_EQ(inv.down(), inv2.down()) << what;
      ASSERT_EQ(sq.down(), sq2.down()) << what;
      // ternary_epilogue alone.
      DevBuf<float> y(x0), y2(x0), one(inv0);
      cuda::TernaryEpilogue ep = p.ep;
      ep.y = y.p;
      cuda::ternary_epilogue(dparts.p, ld, M, width, one.p, ep, nullptr, kParts, stride);
      ep.y = y2.p;
      cuda::ternary_epilogue(dacc.p, ld, M, width, one.p, ep, nullptr);
      ASSERT_EQ(y.down(), y2.down()) << "ternary_epilogue " << what;
      // Overlapping parts are refused.
      EXPECT_THROW(cuda::ternary_epilogue(dparts.p, ld, M, width, one.p, ep, nullptr, kParts, 4), Error) << what;
    }
  }
}

// Pending int8-GEMM sums applied by the next row kernel (residual_norm_quant, glu_norm_quant_sums) give the bits of
// ternary_epilogue followed by norm_quant / glu_norm_quant: the residual stream, q, inv_s and sumq, with inv_s
// both the pending sums' multipliers and the kernel's output (as in the forward), with segments, with and without
// the norm, on widths of the vector kernels and of the fallback (odd widths).
TEST(CudaKernels, PendingSumsRowKernelsMatchEpilogueThenRowKernel) {
  REQUIRE_GPU();
  std::mt19937 rng(43);
  std::uniform_int_distribution<int> ad(-90000, 90000);
  for (auto [M, D] : std::vector<std::pair<int, int>>{{1, 2560}, {17, 2560}, {64, 6912}, {5, 1028}, {3, 333}}) {
    const int kp = (D + 63) / 64 * 64;
    for (bool glu : {false, true}) {
      const int width = glu ? 2 * D : D, ld = width + (D % 4 ? 1 : 4);  // row strides of the sums and the output
      std::vector<int32_t> acc(static_cast<size_t>(M) * ld);
      for (auto& a : acc) a = ad(rng);
      std::vector<float> inv0(M);
      for (int m = 0; m < M; ++m) inv0[m] = 1e-4f * static_cast<float>(m + 3);
      const auto x0 = random_floats(rng, static_cast<size_t>(M) * (glu ? 2 * D : D), 2.0f);
      const auto nw = random_floats(rng, D, 1.0f);
      DevBuf<int32_t> dacc(acc), sq(M), sq2(M);
      DevBuf<float> dnw(nw), act(static_cast<size_t>(M) * D);
      DevBuf<int8_t> q(static_cast<size_t>(M) * kp), q2(static_cast<size_t>(M) * kp);
      for (bool norm : {true, false}) {
        if (!glu && !norm) continue;  // residual_norm_quant always normalizes
        for (bool relu2 : {true, false}) {
          if (!glu && !relu2) continue;
          // Fused: inv_s in / out the same buffer.
          DevBuf<float> x(x0), inv(inv0), x2(x0), inv2(inv0);
          cuda::PendingSums p;
          p.acc = dacc.p;
          p.ldacc = ld;
          p.inv_s = inv.p;
          p.ep.seg_end[0] = glu ? D : D / 3;
          p.ep.seg_end[1] = glu ? 2 * D : D / 2;
          p.ep.seg_end[2] = width;
          p.ep.seg_scale[0] = 0.37f, p.ep.seg_scale[1] = 1.9f, p.ep.seg_scale[2] = 0.05f;
          p.ep.y = x.p;
          p.ep.ldy = glu ? 2 * D : D;
          p.ep.add = !glu;
          const float* w = norm ? dnw.p : nullptr;
          if (glu) cuda::glu_norm_quant_sums(p, M, D, relu2, w, 1e-6f, act.p, q.p, kp, inv.p, sq.p, nullptr);
          else cuda::residual_norm_quant(p, M, D, w, 1e-6f, q.p, kp, inv.p, sq.p, nullptr);
          // The two kernels it stands for.
          cuda::TernaryEpilogue ep = p.ep;
          ep.y = x2.p;
          cuda::ternary_epilogue(dacc.p, ld, M, width, inv2.p, ep, nullptr);
          if (glu) cuda::glu_norm_quant(x2.p, M, D, relu2, w, 1e-6f, act.p, q2.p, kp, inv2.p, sq2.p, nullptr);
          else cuda::norm_quant(x2.p, D, nullptr, w, M, D, 1e-6f, nullptr, q2.p, kp, inv2.p, sq2.p, nullptr);
          const std::string what = "M=" + std::to_string(M) + " D=" + std::to_string(D) + " glu " +
                                   std::to_string(glu) + " norm " + std::to_string(norm) + " relu2 " +
                                   std::to_string(relu2);
          if (!glu) {
            ASSERT_EQ(x.down(), x2.down()) << what;  // the residual stream
          }
          ASSERT_EQ(q.down(), q2.down()) << what;
          ASSERT_EQ(inv.down(), inv2.down()) << what;
          ASSERT_EQ(sq.down(), sq2.down()) << what;
          const auto xs = x.down();
          if (!glu) {
            EXPECT_NE(xs, x0) << what;  // the sums were added
          }
        }
      }
    }
  }
}

// The fused GLU + RMSNorm + quantization equals glu() then cpu rms_norm + quantization (relu2: exactly; silu: the
// same float operations as the two-kernel path, so equal to it), on ragged widths, with and without the norm.
TEST(CudaKernels, GluNormQuantVsCpu) {
  REQUIRE_GPU();
  std::mt19937 rng(31);
  for (auto [M, I] : std::vector<std::pair<int, int>>{{1, 4}, {3, 100}, {1, 6912}, {5, 1028}, {2, 333}, {1, 8196}}) {
    const int kp = (I + 63) / 64 * 64;
    const auto gu = random_floats(rng, static_cast<size_t>(M) * 2 * I, 2.0f);
    const auto wt = random_floats(rng, I, 1.0f);
    DevBuf<float> dgu(gu), dw(wt), act(static_cast<size_t>(M) * I), act2(static_cast<size_t>(M) * I), inv(M),
        inv2(M);
    DevBuf<int8_t> q(static_cast<size_t>(M) * kp), q2(static_cast<size_t>(M) * kp);
    DevBuf<int32_t> sq(M), sq2(M);
    for (bool relu2 : {true, false}) {
      for (bool norm : {true, false}) {
        const float* w = norm ? dw.p : nullptr;
        cuda::glu_norm_quant(dgu.p, M, I, relu2, w, 1e-6f, act.p, q.p, kp, inv.p, sq.p, nullptr);
        // Two-kernel path on the GPU.
        cuda::glu(dgu.p, M, I, relu2, act2.p, nullptr);
        cuda::norm_quant(act2.p, I, nullptr, w, M, I, 1e-6f, nullptr, q2.p, kp, inv2.p, sq2.p, nullptr);
        const auto gq = q.down();
        ASSERT_EQ(gq, q2.down()) << "M=" << M << " I=" << I << " relu2 " << relu2 << " norm " << norm;
        ASSERT_EQ(inv.down(), inv2.down());
        ASSERT_EQ(sq.down(), sq2.down());
        if (!relu2) continue;
        // CPU reference (relu2 GLU is exact; RMSNorm within rounding of the double sum, so compare q exactly only
        // where no value sits within one ulp of a rounding boundary: in practice all).
        std::vector<float> a(static_cast<size_t>(M) * I), y(a.size());
        for (int m = 0; m < M; ++m) {
          const float* g = &gu[static_cast<size_t>(m) * 2 * I];
          cpu::relu2_mul(g, g + I, &a[static_cast<size_t>(m) * I], I);
        }
        if (norm) cpu::rms_norm(a.data(), wt.data(), y.data(), M, I, 1e-6f);
        else y = a;
        std::vector<int8_t> rq(static_cast<size_t>(M) * I);
        std::vector<float> rinv(M);
        cpu::quantize_rows_absmax_i8(y.data(), M, I, rq.data(), rinv.data());
        const auto gs = sq.down();
        for (int m = 0; m < M; ++m) {
          int32_t sum = 0;
          for (int d = 0; d < kp; ++d) {
            const int want = d < I ? rq[static_cast<size_t>(m) * I + d] : 0;
            ASSERT_EQ(gq[static_cast<size_t>(m) * kp + d], want) << m << "," << d << " I=" << I;
            sum += want;
          }
          EXPECT_EQ(gs[m], sum);
        }
      }
    }
  }
}

// norm_quant reading rows through a row map (the lm_head's selected rows) equals the gathered rows.
TEST(CudaKernels, NormQuantRowMap) {
  REQUIRE_GPU();
  std::mt19937 rng(4);
  const int R = 6, D = 640, kp = 640;
  const auto x = random_floats(rng, static_cast<size_t>(R) * D, 2.0f), wt = random_floats(rng, D);
  std::vector<int32_t> map = {5, 0, 3};
  std::vector<float> g;
  for (int r : map) g.insert(g.end(), x.begin() + static_cast<size_t>(r) * D, x.begin() + static_cast<size_t>(r + 1) * D);
  DevBuf<float> dx(x), dg(g), dw(wt), inv(3), inv2(3);
  DevBuf<int32_t> dmap(map), sq(3), sq2(3);
  DevBuf<int8_t> q(3 * kp), q2(3 * kp);
  cuda::norm_quant(dx.p, D, dmap.p, dw.p, 3, D, 1e-5f, nullptr, q.p, kp, inv.p, sq.p, nullptr);
  cuda::norm_quant(dg.p, D, nullptr, dw.p, 3, D, 1e-5f, nullptr, q2.p, kp, inv2.p, sq2.p, nullptr);
  EXPECT_EQ(q.down(), q2.down());
  EXPECT_EQ(inv.down(), inv2.down());
  EXPECT_EQ(sq.down(), sq2.down());
}

// The tensor-core probe of cuda-bench runs its MMAs: thread 0's sum equals a scalar m16n8k32 over the operands the
// probe gives the 32 lanes of a warp (PTX fragment layouts: lane (g, t) holds A rows g / g + 8 at k 4t.. and
// 16 + 4t.., B column g at the same k, C rows g / g + 8 at columns 2t, 2t + 1), times the 8 accumulators and the
// iterations; bad arguments throw.
TEST(CudaKernels, MmaProbeAccumulates) {
  REQUIRE_GPU();
  int A[16][32] = {}, B[32][8] = {};
  auto bytes = [](uint32_t v, int* out) {
    for (int i = 0; i < 4; ++i) out[i] = static_cast<int8_t>(static_cast<uint8_t>(v >> (8 * i)));
  };
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane >> 2, t = lane & 3;
    const uint32_t a0 = static_cast<uint32_t>(lane) * 0x01010101u;
    int v[4];
    bytes(a0, v);
    for (int i = 0; i < 4; ++i) A[g][4 * t + i] = v[i];
    bytes(a0 ^ 0x11111111u, v);
    for (int i = 0; i < 4; ++i) A[g + 8][4 * t + i] = v[i];
    bytes(a0 ^ 0x22222222u, v);
    for (int i = 0; i < 4; ++i) A[g][16 + 4 * t + i] = v[i];
    bytes(a0 ^ 0x44444444u, v);
    for (int i = 0; i < 4; ++i) A[g + 8][16 + 4 * t + i] = v[i];
    bytes(a0 ^ 0x55555555u, v);
    for (int i = 0; i < 4; ++i) B[4 * t + i][g] = v[i];
    bytes(a0 ^ 0x2a2a2a2au, v);
    for (int i = 0; i < 4; ++i) B[16 + 4 * t + i][g] = v[i];
  }
  auto c = [&](int r, int col) {
    int s = 0;
    for (int k = 0; k < 32; ++k) s += A[r][k] * B[k][col];
    return s;
  };
  const int32_t one = 8 * (c(0, 0) + c(0, 1) + c(8, 0) + c(8, 1));  // thread 0, one iteration
  DevBuf<int32_t> s1(4), s3(4);
  cuda::mma_s8_probe(4, 8, 1, s1.p, nullptr);
  cuda::mma_s8_probe(4, 8, 3, s3.p, nullptr);
  const auto a = s1.down(), b = s3.down();
  ASSERT_NE(one, 0);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(a[i], one) << i;
    EXPECT_EQ(b[i], 3 * one) << i;
  }
  EXPECT_THROW(cuda::mma_s8_probe(0, 8, 1, s1.p, nullptr), Error);
  EXPECT_THROW(cuda::mma_s8_probe(1, 33, 1, s1.p, nullptr), Error);
}

// A chain of dependent kernels (norm + quantization -> ternary GEMV with residual add -> fused GLU norm -> ...) on
// a stream with programmatic dependent launch, plain and captured in a graph, equals the same chain launched
// ordinarily (no kernel may read its predecessor's output early).
TEST(CudaKernels, DependentLaunchChainMatchesOrdinary) {
  REQUIRE_GPU();
  std::mt19937 rng(17);
  const int D = 2560, I = 1024, n = 2 * I;
  const auto s1 = cuda::Tc2Shape::of(n, D), s2 = cuda::Tc2Shape::of(D, I);
  const auto w1 = random_ternary(rng, n, D), w2 = random_ternary(rng, D, I);
  DevBuf<uint32_t> dw1(cuda::pack_tc2(w1.data(), n, D)), dw2(cuda::pack_tc2(w2.data(), D, I));
  const auto x0 = random_floats(rng, D), nw = random_floats(rng, D), nw2 = random_floats(rng, I);
  DevBuf<float> dnw(nw), dnw2(nw2);
  cudaStream_t st;
  cuda::check(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), "stream");
  auto chain = [&](bool pdl, bool graph) {
    cuda::set_dependent_launch(pdl);
    DevBuf<float> x(x0), gu(n), act(I), inv(1);
    DevBuf<int8_t> q(std::max(s1.kp, s2.kp));
    DevBuf<int32_t> sq(1);
    auto body = [&] {
      for (int l = 0; l < 6; ++l) {
        cuda::norm_quant(x.p, D, nullptr, dnw.p, 1, D, 1e-5f, nullptr, q.p, static_cast<int>(s1.kp), inv.p, sq.p, st);
        cuda::TernaryEpilogue e1;
        e1.y = gu.p, e1.ldy = n, e1.seg_end[0] = e1.seg_end[1] = e1.seg_end[2] = n, e1.seg_scale[0] = 0.01f;
        cuda::ternary_matmul(dw1.p, n, static_cast<int>(s1.np), static_cast<int>(s1.kp), q.p, sq.p, inv.p, 1, e1, st);
        cuda::glu_norm_quant(gu.p, 1, I, true, dnw2.p, 1e-5f, act.p, q.p, static_cast<int>(s2.kp), inv.p, sq.p, st);
        cuda::TernaryEpilogue e2;
        e2.y = x.p, e2.ldy = D, e2.add = true, e2.seg_end[0] = e2.seg_end[1] = e2.seg_end[2] = D;
        e2.seg_scale[0] = 0.02f;
        cuda::ternary_matmul(dw2.p, D, static_cast<int>(s2.np), static_cast<int>(s2.kp), q.p, sq.p, inv.p, 1, e2, st);
      }
    };
    if (graph) {
      cudaGraph_t g = nullptr;
      cudaGraphExec_t ge = nullptr;
      cuda::check(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal), "capture");
      body();
      cuda::check(cudaStreamEndCapture(st, &g), "end capture");
      cuda::check(cudaGraphInstantiate(&ge, g, 0), "instantiate");
      cuda::check(cudaGraphLaunch(ge, st), "graph launch");
      cuda::check(cudaStreamSynchronize(st), "sync");
      cudaGraphExecDestroy(ge);
      cudaGraphDestroy(g);
    } else {
      body();
      cuda::check(cudaStreamSynchronize(st), "sync");
    }
    return x.down();
  };
  const auto ref = chain(false, false);
  EXPECT_EQ(chain(true, false), ref);
  EXPECT_EQ(chain(true, true), ref);
  cuda::set_dependent_launch(true);
  cudaStreamDestroy(st);
}


#endif
