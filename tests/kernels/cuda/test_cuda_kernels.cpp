// The CUDA kernels against the CPU scalar references: integer paths exactly, float paths within stated
// tolerances, on random shapes including ragged ones. Skipped (visibly) without CUDA or without a GPU; the tc2
// packing test runs everywhere.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/ops.h"
#include "formats/ternary_bitcos_gpu.h"
#include "formats/ternary_tc2.h"
#include "formats/ternary_tcb.h"
#include "model/linear.h"
#include "backend/cuda/cuda_backend.h"
#include "test_util.h"

#if TRITIUM_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "kernels/cuda/kernels.h"
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

namespace {

#define REQUIRE_GPU() \
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device: CUDA kernel test skipped"

template <class T>
struct DevBuf {
  T* p = nullptr;
  size_t n = 0;
  explicit DevBuf(size_t count) : n(count) {
    cuda::check(cudaMalloc(reinterpret_cast<void**>(&p), std::max<size_t>(count, 1) * sizeof(T)), "cudaMalloc");
    cuda::check(cudaMemset(p, 0xA5, std::max<size_t>(count, 1) * sizeof(T)), "cudaMemset (poison)");
  }
  explicit DevBuf(const std::vector<T>& h) : DevBuf(h.size()) { up(h); }
  ~DevBuf() { cudaFree(p); }
  void up(const std::vector<T>& h) {
    cuda::check(cudaMemcpy(p, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice), "H2D");
  }
  std::vector<T> down() const {
    std::vector<T> h(n);
    cuda::check(cudaDeviceSynchronize(), "sync");
    cuda::check(cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost), "D2H");
    return h;
  }
};

std::vector<float> random_floats(std::mt19937& rng, size_t n, float scale = 1.0f) {
  std::normal_distribution<float> d(0, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// The projection of the bit-exactness tests: n = 328 rows in three weight segments (288 rows x 0.37, 20 x 1.9,
// 20 x 0.05), as a CPU TernaryLinear and as the matching GPU epilogue writing y [M, n].
constexpr int kProjRows = 3 * 96 + 40;
TernaryLinear segmented_linear(const std::vector<int8_t>& w, int k) {
  return TernaryLinear(pack_ternary(TernaryFormat::kI2, w.data(), kProjRows, k),
                       {{96 * 3, 0.37f}, {20, 1.9f}, {20, 0.05f}});
}
cuda::TernaryEpilogue segmented_epilogue(float* y) {
  cuda::TernaryEpilogue ep;
  ep.seg_end[0] = 288, ep.seg_end[1] = 308, ep.seg_end[2] = kProjRows;
  ep.seg_scale[0] = 0.37f, ep.seg_scale[1] = 1.9f, ep.seg_scale[2] = 0.05f;
  ep.y = y, ep.ldy = kProjRows;
  return ep;
}

}  // namespace

// Integer GEMVs (dp4a with 8, 16 and 32 lanes per row; int8 MMA with 4 and 8 warps per 16 rows), the GEMM (int8
// MMA) and the automatic choice against a scalar int32 reference.
TEST(CudaKernels, TernaryMatmulExactRandomRagged) {
  REQUIRE_GPU();
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> xd(-128, 127);
  struct Shape { int n, k; };
  for (Shape sh : {Shape{1, 1}, Shape{37, 100}, Shape{64, 64}, Shape{200, 640}, Shape{130, 2560}, Shape{515, 1000}}) {
    const auto w = random_ternary(rng, sh.n, sh.k, 0.3);
    const auto s = cuda::Tc2Shape::of(sh.n, sh.k);
    DevBuf<uint32_t> dw(cuda::pack_tc2(w.data(), sh.n, sh.k));
    for (int M : {1, 2, 3, 4, 5, 8, 13, 16, 17, 64, 100}) {
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
// TernaryLinear::forward on the CPU bit for bit.
TEST(CudaKernels, TernaryProjectionBitExactVsCpu) {
  REQUIRE_GPU();
  std::mt19937 rng(5);
  const int n = kProjRows, k = 320;
  const auto w = random_ternary(rng, n, k);
  const TernaryLinear lin = segmented_linear(w, k);
  const auto s = cuda::Tc2Shape::of(n, k);
  DevBuf<uint32_t> dw(cuda::pack_tc2(w.data(), n, k));
  for (int M : {1, 4, 16, 33}) {
    const auto x = random_floats(rng, static_cast<size_t>(M) * k, 2.0f);
    std::vector<float> ref(static_cast<size_t>(M) * n), base = random_floats(rng, static_cast<size_t>(M) * n);
    lin.forward(x.data(), M, ref.data());
    DevBuf<float> dx(x), dy(static_cast<size_t>(M) * n), dadd(base), inv(M);
    DevBuf<int8_t> q(static_cast<size_t>(M) * s.kp);
    DevBuf<int32_t> sq(M);
    cuda::norm_quant(dx.p, k, nullptr, nullptr, M, k, 1e-6f, nullptr, q.p, static_cast<int>(s.kp), inv.p, sq.p,
                     nullptr);
    cuda::TernaryEpilogue ep = segmented_epilogue(dy.p);
    cuda::ternary_matmul(dw.p, n, static_cast<int>(s.np), static_cast<int>(s.kp), q.p, sq.p, inv.p, M, ep, nullptr);
    EXPECT_EQ(dy.down(), ref) << "M=" << M;
    ep.y = dadd.p, ep.add = true;
    cuda::ternary_matmul(dw.p, n, static_cast<int>(s.np), static_cast<int>(s.kp), q.p, sq.p, inv.p, M, ep, nullptr,
                         cuda::TernaryKernel::kMmaGemm);
    auto got = dadd.down();
    for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], base[i] + ref[i]) << i;
  }
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

// Fused decode attention (RoPE + KV write + attention) equals rope_kv_write then attention_paged: the KV pools
// exactly, the output within 1e-6 relative (the new position enters the softmax last), for three sequences at
// ragged positions (0, a block boundary, mid-block) over a shuffled block table, head_dim 64 and 128.
TEST(CudaKernels, AttentionDecodeRopeMatchesUnfused) {
  REQUIRE_GPU();
  std::mt19937 rng(23);
  for (int D : {64, 128}) {
    const int H = 8, KVH = 2, bs = 16, nblocks = 24, maxpos = 128, half = D / 2, btw = 8;
    const int qd = H * D, kvd = KVH * D, w = qd + 2 * kvd;
    std::vector<float> ct(static_cast<size_t>(maxpos) * half), st(ct.size());
    for (size_t i = 0; i < ct.size(); ++i) {
      ct[i] = std::cos(0.013f * static_cast<float>(i));
      st[i] = std::sin(0.013f * static_cast<float>(i));
    }
    std::vector<int32_t> blocks(nblocks);
    for (int i = 0; i < nblocks; ++i) blocks[i] = i;
    std::shuffle(blocks.begin(), blocks.end(), rng);
    std::vector<int32_t> bt(3 * btw);
    for (int i = 0; i < 3 * btw; ++i) bt[i] = blocks[i];
    const std::vector<int32_t> pos = {0, 16, 77}, seq = {0, 1, 2};
    const int rows = 3;
    const auto qkv = random_floats(rng, static_cast<size_t>(rows) * w);
    const auto pool0 = random_floats(rng, static_cast<size_t>(nblocks) * bs * kvd);  // earlier positions
    DevBuf<float> dct(ct), dst(st);
    DevBuf<int32_t> dpos(pos), dseq(seq), dbt(bt);
    DevBuf<float> q1(qkv), k1(pool0), v1(pool0), o1(static_cast<size_t>(rows) * qd);
    cuda::rope_kv_write(q1.p, rows, H, KVH, D, dct.p, dst.p, dpos.p, dseq.p, dbt.p, btw, bs, k1.p, v1.p, nullptr);
    cuda::attention_paged(q1.p, w, rows, H, KVH, D, dpos.p, dseq.p, dbt.p, btw, bs, k1.p, v1.p, o1.p, nullptr);
    DevBuf<float> q2(qkv), k2(pool0), v2(pool0), o2(static_cast<size_t>(rows) * qd);
    cuda::attention_decode_rope(q2.p, w, rows, H, KVH, D, dct.p, dst.p, dpos.p, dseq.p, dbt.p, btw, bs, k2.p, v2.p,
                                o2.p, nullptr);
    EXPECT_EQ(k2.down(), k1.down()) << "k pool D=" << D;
    EXPECT_EQ(v2.down(), v1.down()) << "v pool D=" << D;
    EXPECT_EQ(q2.down(), qkv) << "qkv left as it was";
    const auto a = o1.down(), b = o2.down();
    for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(b[i], a[i], 1e-6 * std::fabs(a[i]) + 1e-6) << i << " D=" << D;
  }
}

namespace {

// A paged KV cache of several sequences with random K/V over a shuffled (non-contiguous) block table, and a
// double-precision reference of causal GQA attention over it.
struct PagedCase {
  int H, KVH, D, bs = 16, btw = 0, nblocks = 0;
  std::vector<int32_t> bt;
  std::vector<float> kpool, vpool;
  PagedCase(std::mt19937& rng, int H_, int KVH_, int D_, const std::vector<int>& ctx) : H(H_), KVH(KVH_), D(D_) {
    int maxc = 1;
    for (int c : ctx) maxc = std::max(maxc, c);
    btw = (maxc + bs - 1) / bs + 1;
    nblocks = static_cast<int>(ctx.size()) * btw + 3;
    std::vector<int32_t> ids(nblocks);
    for (int i = 0; i < nblocks; ++i) ids[i] = i;
    std::shuffle(ids.begin(), ids.end(), rng);
    bt.assign(ctx.size() * btw, 0);
    for (size_t i = 0; i < bt.size(); ++i) bt[i] = ids[i];
    kpool = random_floats(rng, static_cast<size_t>(nblocks) * bs * KVH * D);
    vpool = random_floats(rng, kpool.size());
  }
  /// out[H * D] for query row q (head h at h * D) at position p of sequence s.
  std::vector<double> ref(const float* q, int p, int s) const {
    std::vector<double> o(static_cast<size_t>(H) * D, 0.0);
    const int kvd = KVH * D;
    std::vector<double> sc(p + 1);
    for (int h = 0; h < H; ++h) {
      const int kvh = h / (H / KVH);
      double mx = -1e300;
      for (int j = 0; j <= p; ++j) {
        const size_t off = (static_cast<size_t>(bt[s * btw + j / bs]) * bs + j % bs) * kvd + kvh * D;
        double d = 0;
        for (int i = 0; i < D; ++i) d += static_cast<double>(q[h * D + i]) * kpool[off + i];
        sc[j] = d / std::sqrt(static_cast<double>(D));
        mx = std::max(mx, sc[j]);
      }
      double sum = 0;
      for (int j = 0; j <= p; ++j) sum += (sc[j] = std::exp(sc[j] - mx));
      for (int j = 0; j <= p; ++j) {
        const size_t off = (static_cast<size_t>(bt[s * btw + j / bs]) * bs + j % bs) * kvd + kvh * D;
        for (int i = 0; i < D; ++i) o[h * D + i] += sc[j] / sum * vpool[off + i];
      }
    }
    return o;
  }
};

/// ||a - b|| / ||b|| over one row of n values.
template <class A, class B>
double rel_err(const A* a, const B* b, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; ++i) {
    if (std::isnan(static_cast<double>(a[i]))) return 1e30;
    const double d = static_cast<double>(a[i]) - static_cast<double>(b[i]);
    num += d * d;
    den += static_cast<double>(b[i]) * b[i];
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

}  // namespace

// Split-K decode attention equals attention_paged (and a double reference) within 1e-5 relative per row, for
// contexts 1, 17, 300 and 1500 in one batch over a shuffled block table, head_dim 64 / 128, GQA ratios 1 and 4,
// several chunk counts; the counters are left zero; a graph captured once (with programmatic dependent launch)
// and replayed after the positions change still matches.
TEST(CudaKernels, AttentionSplitMatchesPaged) {
  REQUIRE_GPU();
  std::mt19937 rng(41);
  const std::vector<int> ctx = {1, 17, 300, 1500, 64, 65};
  for (int D : {64, 128}) {
    for (auto [H, KVH] : std::vector<std::pair<int, int>>{{4, 4}, {8, 2}}) {
      PagedCase pc(rng, H, KVH, D, ctx);
      const int rows = static_cast<int>(ctx.size()), qd = H * D, ldq = qd + 64;  // strided q rows
      std::vector<int32_t> pos(rows), seq(rows);
      for (int r = 0; r < rows; ++r) pos[r] = ctx[r] - 1, seq[r] = r;
      const auto q = random_floats(rng, static_cast<size_t>(rows) * ldq);
      DevBuf<float> dq(q), dk(pc.kpool), dv(pc.vpool), o1(static_cast<size_t>(rows) * qd),
          o2(static_cast<size_t>(rows) * qd),
          part(static_cast<size_t>(rows) * H * cuda::kAttentionMaxSplit * (D + 2));
      DevBuf<int32_t> dpos(pos), dseq(seq), dbt(pc.bt), cnt(static_cast<size_t>(rows) * H);
      cnt.up(std::vector<int32_t>(static_cast<size_t>(rows) * H, 0));
      cuda::attention_paged(dq.p, ldq, rows, H, KVH, D, dpos.p, dseq.p, dbt.p, pc.btw, pc.bs, dk.p, dv.p, o1.p,
                            nullptr);
      const auto a = o1.down();
      for (int r = 0; r < rows; ++r) {
        const auto want = pc.ref(&q[static_cast<size_t>(r) * ldq], pos[r], seq[r]);
        EXPECT_LT(rel_err(&a[static_cast<size_t>(r) * qd], want.data(), qd), 1e-5) << "paged ctx " << ctx[r];
      }
      for (int ns : {2, 5, cuda::kAttentionMaxSplit, cuda::attention_split_count(rows, H)}) {
        cuda::attention_paged_split(dq.p, ldq, rows, H, KVH, D, dpos.p, dseq.p, dbt.p, pc.btw, pc.bs, dk.p, dv.p,
                                    o2.p, ns, part.p, cnt.p, nullptr);
        const auto b = o2.down();
        for (int r = 0; r < rows; ++r)
          EXPECT_LT(rel_err(&b[static_cast<size_t>(r) * qd], &a[static_cast<size_t>(r) * qd], qd), 1e-5)
              << "D=" << D << " H=" << H << " KVH=" << KVH << " nsplit " << ns << " ctx " << ctx[r];
        for (int32_t c : cnt.down()) ASSERT_EQ(c, 0) << "split counters must be left zero";
      }
      // Graph: captured once with 16 chunks, replayed at other positions.
      cudaStream_t st;
      cuda::check(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), "stream");
      cudaGraph_t g = nullptr;
      cudaGraphExec_t ge = nullptr;
      cuda::check(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal), "capture");
      for (int rep = 0; rep < 2; ++rep)  // two dependent launches in a row (PDL between them)
        cuda::attention_paged_split(dq.p, ldq, rows, H, KVH, D, dpos.p, dseq.p, dbt.p, pc.btw, pc.bs, dk.p, dv.p,
                                    o2.p, cuda::kAttentionMaxSplit, part.p, cnt.p, st);
      cuda::check(cudaStreamEndCapture(st, &g), "end capture");
      cuda::check(cudaGraphInstantiate(&ge, g, 0), "instantiate");
      for (int shift : {0, -7, -250}) {
        std::vector<int32_t> p2(rows);
        for (int r = 0; r < rows; ++r) p2[r] = std::max(0, pos[r] + shift);
        dpos.up(p2);
        cuda::check(cudaGraphLaunch(ge, st), "graph launch");
        cuda::check(cudaStreamSynchronize(st), "sync");
        cuda::attention_paged(dq.p, ldq, rows, H, KVH, D, dpos.p, dseq.p, dbt.p, pc.btw, pc.bs, dk.p, dv.p, o1.p,
                              nullptr);
        const auto ra = o1.down(), rb = o2.down();
        for (int r = 0; r < rows; ++r)
          EXPECT_LT(rel_err(&rb[static_cast<size_t>(r) * qd], &ra[static_cast<size_t>(r) * qd], qd), 1e-5)
              << "graph replay, shift " << shift << " ctx " << p2[r] + 1;
        for (int32_t c : cnt.down()) ASSERT_EQ(c, 0);
      }
      cudaGraphExecDestroy(ge);
      cudaGraphDestroy(g);
      cudaStreamDestroy(st);
    }
  }
}

// Split-K fused decode attention (RoPE + KV write + attention) equals attention_decode_rope: the KV pools
// exactly, the output within 1e-5 relative, at contexts 1, 17, 300, 1500 (and chunk boundaries 64 / 65 / 129).
TEST(CudaKernels, AttentionDecodeRopeSplitMatchesUnsplit) {
  REQUIRE_GPU();
  std::mt19937 rng(43);
  const std::vector<int> ctx = {1, 17, 300, 1500, 65, 129, 64};
  for (int D : {64, 128}) {
    for (auto [H, KVH] : std::vector<std::pair<int, int>>{{4, 4}, {8, 2}}) {
      PagedCase pc(rng, H, KVH, D, ctx);
      const int rows = static_cast<int>(ctx.size()), qd = H * D, kvd = KVH * D, w = qd + 2 * kvd, half = D / 2;
      const int maxpos = 1600;
      std::vector<float> ct(static_cast<size_t>(maxpos) * half), sn(ct.size());
      for (size_t i = 0; i < ct.size(); ++i) {
        ct[i] = std::cos(0.0007f * static_cast<float>(i));
        sn[i] = std::sin(0.0007f * static_cast<float>(i));
      }
      std::vector<int32_t> pos(rows), seq(rows);
      for (int r = 0; r < rows; ++r) pos[r] = ctx[r] - 1, seq[r] = r;
      const auto qkv = random_floats(rng, static_cast<size_t>(rows) * w);
      DevBuf<float> dct(ct), dsn(sn), dq(qkv), k1(pc.kpool), v1(pc.vpool), k2(pc.kpool), v2(pc.vpool),
          o1(static_cast<size_t>(rows) * qd), o2(static_cast<size_t>(rows) * qd),
          part(static_cast<size_t>(rows) * H * cuda::kAttentionMaxSplit * (D + 2));
      DevBuf<int32_t> dpos(pos), dseq(seq), dbt(pc.bt), cnt(static_cast<size_t>(rows) * H);
      cnt.up(std::vector<int32_t>(static_cast<size_t>(rows) * H, 0));
      cuda::attention_decode_rope(dq.p, w, rows, H, KVH, D, dct.p, dsn.p, dpos.p, dseq.p, dbt.p, pc.btw, pc.bs, k1.p,
                                  v1.p, o1.p, nullptr);
      const auto a = o1.down();
      const auto kref = k1.down(), vref = v1.down();
      for (int ns : {3, cuda::kAttentionMaxSplit, cuda::attention_split_count(rows, H)}) {
        k2.up(pc.kpool);
        v2.up(pc.vpool);
        cuda::attention_decode_rope_split(dq.p, w, rows, H, KVH, D, dct.p, dsn.p, dpos.p, dseq.p, dbt.p, pc.btw,
                                          pc.bs, k2.p, v2.p, o2.p, ns, part.p, cnt.p, nullptr);
        EXPECT_EQ(k2.down(), kref) << "k pool D=" << D << " nsplit " << ns;
        EXPECT_EQ(v2.down(), vref) << "v pool D=" << D << " nsplit " << ns;
        const auto b = o2.down();
        for (int r = 0; r < rows; ++r)
          EXPECT_LT(rel_err(&b[static_cast<size_t>(r) * qd], &a[static_cast<size_t>(r) * qd], qd), 1e-5)
              << "D=" << D << " H=" << H << " KVH=" << KVH << " nsplit " << ns << " ctx " << ctx[r];
        for (int32_t c : cnt.down()) ASSERT_EQ(c, 0);
      }
      EXPECT_EQ(dq.down(), qkv) << "qkv left as it was";
    }
  }
}

// The prefill tiling: runs of one sequence with consecutive positions, cut at tile_rows.
TEST(CudaKernels, AttentionPrefillTiles) {
  const std::vector<int32_t> pos = {0, 1, 2, 3, 4, 9, 10, 5, 6, 0};
  const std::vector<int32_t> seq = {0, 0, 0, 0, 0, 0, 0, 1, 1, 2};
  std::vector<int32_t> tiles;
  cuda::attention_prefill_tiles(pos.data(), seq.data(), 10, 3, tiles);
  EXPECT_EQ(tiles, (std::vector<int32_t>{0, 3, 3, 2, 5, 2, 7, 2, 9, 1}));
  EXPECT_EQ(cuda::attention_prefill_tile_rows(20, 5), 16);
  EXPECT_EQ(cuda::attention_prefill_tile_rows(8, 8), 64);
  EXPECT_EQ(cuda::attention_prefill_tile_rows(8, 3), 0);
  EXPECT_THROW(cuda::attention_prefill_tiles(pos.data(), seq.data(), 10, 0, tiles), Error);
}

// Flash-style prefill attention equals attention_paged (and a double reference on a sample of rows) within
// 1e-5 relative per row: chunks of 300 rows at position 0, 300 rows ending at position 1499 (context 1500),
// 17 rows at 0, a single row at 0 and a decode row at 799, head_dim 64 / 128, GQA ratios 1 and 4.
TEST(CudaKernels, AttentionPrefillMatchesPaged) {
  REQUIRE_GPU();
  std::mt19937 rng(47);
  struct Chunk { int start, T; };
  const std::vector<Chunk> chunks = {{0, 300}, {1200, 300}, {0, 17}, {0, 1}, {799, 1}};
  std::vector<int> ctx;
  for (const auto& c : chunks) ctx.push_back(c.start + c.T);
  for (int D : {64, 128}) {
    for (auto [H, KVH] : std::vector<std::pair<int, int>>{{4, 4}, {8, 2}}) {
      PagedCase pc(rng, H, KVH, D, ctx);
      const int qd = H * D, ldq = qd + 2 * KVH * D;
      std::vector<int32_t> pos, seq;
      for (size_t s = 0; s < chunks.size(); ++s)
        for (int t = 0; t < chunks[s].T; ++t) pos.push_back(chunks[s].start + t), seq.push_back(static_cast<int>(s));
      const int rows = static_cast<int>(pos.size());
      const auto q = random_floats(rng, static_cast<size_t>(rows) * ldq);
      std::vector<int32_t> tiles;
      const int tr = cuda::attention_prefill_tile_rows(H, KVH);
      ASSERT_EQ(tr, 64 / (H / KVH));
      cuda::attention_prefill_tiles(pos.data(), seq.data(), rows, tr, tiles);
      DevBuf<float> dq(q), dk(pc.kpool), dv(pc.vpool), o1(static_cast<size_t>(rows) * qd),
          o2(static_cast<size_t>(rows) * qd);
      DevBuf<int32_t> dpos(pos), dseq(seq), dbt(pc.bt), dtiles(tiles);
      cuda::attention_paged(dq.p, ldq, rows, H, KVH, D, dpos.p, dseq.p, dbt.p, pc.btw, pc.bs, dk.p, dv.p, o1.p,
                            nullptr);
      cuda::attention_prefill(dq.p, ldq, H, KVH, D, dpos.p, dseq.p, dbt.p, pc.btw, pc.bs, dk.p, dv.p, o2.p,
                              dtiles.p, static_cast<int>(tiles.size() / 2), nullptr);
      const auto a = o1.down(), b = o2.down();
      for (int r = 0; r < rows; ++r) {
        ASSERT_LT(rel_err(&b[static_cast<size_t>(r) * qd], &a[static_cast<size_t>(r) * qd], qd), 1e-5)
            << "D=" << D << " H=" << H << " KVH=" << KVH << " row " << r << " pos " << pos[r];
        if (r % 13 == 0 || r == rows - 1) {
          const auto want = pc.ref(&q[static_cast<size_t>(r) * ldq], pos[r], seq[r]);
          EXPECT_LT(rel_err(&b[static_cast<size_t>(r) * qd], want.data(), qd), 1e-5) << "vs double, row " << r;
        }
      }
    }
  }
}


// bf16 KV pools: rope_kv_write stores each k / v rounded to bf16 (round to nearest even, core/dtype.h); the paged,
// split-K and prefill kernels over them give bit for bit what they give over f32 pools holding the rounded values;
// the fused decode kernel writes the same pool bits and attends the rounded new position (within 1e-5 of the
// unfused kernels, which add it in another order).
TEST(CudaKernels, Bf16KvPoolsMatchF32PoolsOfRoundedValues) {
  REQUIRE_GPU();
  std::mt19937 rng(53);
  for (int D : {64, 128}) {
    const int H = 8, KVH = 2, bs = 16, half = D / 2, qd = H * D, kvd = KVH * D, w = qd + 2 * kvd;
    const std::vector<int> T = {37, 300};  // prefill lengths of two sequences
    PagedCase pc(rng, H, KVH, D, T);
    const size_t pool = pc.kpool.size();
    const int maxpos = 400;
    std::vector<float> ct(static_cast<size_t>(maxpos) * half), sn(ct.size());
    for (size_t i = 0; i < ct.size(); ++i) ct[i] = std::cos(0.003f * i), sn[i] = std::sin(0.003f * i);
    std::vector<int32_t> pos, seq;
    for (int s = 0; s < 2; ++s)
      for (int t = 0; t < T[s]; ++t) pos.push_back(t), seq.push_back(s);
    const int rows = static_cast<int>(pos.size());
    const auto qkv = random_floats(rng, static_cast<size_t>(rows) * w);
    DevBuf<float> dct(ct), dsn(sn), q32(qkv), q16(qkv), k32(pool), v32(pool), o32(static_cast<size_t>(rows) * qd),
        o16(static_cast<size_t>(rows) * qd), part(static_cast<size_t>(rows) * H * cuda::kAttentionMaxSplit * (D + 2));
    DevBuf<uint16_t> k16(pool), v16(pool);
    DevBuf<int32_t> dpos(pos), dseq(seq), dbt(pc.bt), cnt(static_cast<size_t>(rows) * H);
    cnt.up(std::vector<int32_t>(cnt.n, 0));
    k32.up(std::vector<float>(pool, 0.0f)), v32.up(std::vector<float>(pool, 0.0f));
    k16.up(std::vector<uint16_t>(pool, 0)), v16.up(std::vector<uint16_t>(pool, 0));
    cuda::rope_kv_write(q32.p, rows, H, KVH, D, dct.p, dsn.p, dpos.p, dseq.p, dbt.p, pc.btw, bs, k32.p, v32.p, nullptr);
    cuda::rope_kv_write(q16.p, rows, H, KVH, D, dct.p, dsn.p, dpos.p, dseq.p, dbt.p, pc.btw, bs, k16.p, v16.p, nullptr,
                        cuda::KvElem::kBF16);
    EXPECT_EQ(q32.down(), q16.down()) << "rotated q / k rows";
    auto kf = k32.down(), vf = v32.down();
    const auto kb = k16.down(), vb = v16.down();
    for (size_t i = 0; i < pool; ++i) {
      ASSERT_EQ(kb[i], f32_to_bf16(kf[i])) << "k pool " << i;
      ASSERT_EQ(vb[i], f32_to_bf16(vf[i])) << "v pool " << i;
      kf[i] = bf16_to_f32(kb[i]), vf[i] = bf16_to_f32(vb[i]);
    }
    k32.up(kf), v32.up(vf);
    const cuda::KvElem bf = cuda::KvElem::kBF16;
    cuda::attention_paged(q32.p, w, rows, H, KVH, D, dpos.p, dseq.p, dbt.p, pc.btw, bs, k32.p, v32.p, o32.p, nullptr);
    cuda::attention_paged(q16.p, w, rows, H, KVH, D, dpos.p, dseq.p, dbt.p, pc.btw, bs, k16.p, v16.p, o16.p, nullptr,
                          bf);
    EXPECT_EQ(o32.down(), o16.down()) << "paged D=" << D;
    cuda::attention_paged_split(q32.p, w, rows, H, KVH, D, dpos.p, dseq.p, dbt.p, pc.btw, bs, k32.p, v32.p, o32.p, 4,
                                part.p, cnt.p, nullptr);
    cuda::attention_paged_split(q16.p, w, rows, H, KVH, D, dpos.p, dseq.p, dbt.p, pc.btw, bs, k16.p, v16.p, o16.p, 4,
                                part.p, cnt.p, nullptr, bf);
    EXPECT_EQ(o32.down(), o16.down()) << "split D=" << D;
    std::vector<int32_t> tiles;
    cuda::attention_prefill_tiles(pos.data(), seq.data(), rows, cuda::attention_prefill_tile_rows(H, KVH), tiles);
    DevBuf<int32_t> dtiles(tiles);
    const int nt = static_cast<int>(tiles.size() / 2);
    cuda::attention_prefill(q32.p, w, H, KVH, D, dpos.p, dseq.p, dbt.p, pc.btw, bs, k32.p, v32.p, o32.p, dtiles.p, nt,
                            nullptr);
    cuda::attention_prefill(q16.p, w, H, KVH, D, dpos.p, dseq.p, dbt.p, pc.btw, bs, k16.p, v16.p, o16.p, dtiles.p, nt,
                            nullptr, bf);
    EXPECT_EQ(o32.down(), o16.down()) << "prefill D=" << D;

    // Fused decode of the last position of each sequence over the bf16 pools vs rope_kv_write + attention_paged.
    std::vector<int32_t> dp = {T[0] - 1, T[1] - 1}, ds = {0, 1};
    const auto dq = random_floats(rng, static_cast<size_t>(2) * w);
    DevBuf<float> fq(dq), uq(dq), fo(static_cast<size_t>(2) * qd), uo(static_cast<size_t>(2) * qd);
    DevBuf<int32_t> ddp(dp), dds(ds);
    cuda::attention_decode_rope(fq.p, w, 2, H, KVH, D, dct.p, dsn.p, ddp.p, dds.p, dbt.p, pc.btw, bs, k16.p, v16.p,
                                fo.p, nullptr, bf);
    const auto kfused = k16.down(), vfused = v16.down();
    cuda::rope_kv_write(uq.p, 2, H, KVH, D, dct.p, dsn.p, ddp.p, dds.p, dbt.p, pc.btw, bs, k16.p, v16.p, nullptr, bf);
    EXPECT_EQ(k16.down(), kfused) << "fused k write D=" << D;
    EXPECT_EQ(v16.down(), vfused) << "fused v write D=" << D;
    cuda::attention_paged(uq.p, w, 2, H, KVH, D, ddp.p, dds.p, dbt.p, pc.btw, bs, k16.p, v16.p, uo.p, nullptr, bf);
    const auto a = fo.down(), b = uo.down();
    for (int r = 0; r < 2; ++r)
      EXPECT_LT(rel_err(&a[static_cast<size_t>(r) * qd], &b[static_cast<size_t>(r) * qd], qd), 1e-5) << "fused D=" << D;
  }
}

#endif
