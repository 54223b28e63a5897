// The CUDA kernel benchmark (tritium cuda-bench): ternary kernels vs cuBLAS bf16 on the 2B4T shapes.
#if TRITIUM_HAVE_CUDA
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/cuda/kernels.h"
#include "formats/ternary_bitcos_gpu.h"
#include "formats/ternary_tc2.h"
#include "formats/ternary_tcb.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/int8_linear.h"
#include "bench/cuda_kernel_bench.h"
#include "bench/cuda_bench_util.h"

namespace tritium {
namespace {

using cuda::check;
using Dev = cuda_bench::DeviceBuffer;
using cuda_bench::time_graph;

double copy_bw(cudaStream_t st, int reps) {
  const size_t bytes = size_t{2} << 30;
  Dev a(bytes), b(bytes);
  check(cudaMemset(a.p, 1, bytes), "memset");
  const double us = time_graph(st, 10, reps, [&](int) {
    cuda::copy_bytes(a.p, b.p, bytes, st);
  });
  return 2.0 * static_cast<double>(bytes) / (us * 1e-6) / 1e9;
}

struct Shape2 { int n, k; };

/// GPU BITCOS weights of one shape on the device, rotated over copies (cold L2): masks | row offsets | signs
/// per copy, each buffer 256-byte aligned.
struct BitcosDev {
  cuda::BitcosGpu b;
  size_t off_ro = 0, off_sg = 0, stride = 0;
  int copies = 1;
  std::unique_ptr<Dev> mem;
  BitcosDev(const Shape2& sh, double z, uint32_t seed, size_t rotate_bytes) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<double> u(0, 1);
    std::vector<int8_t> w(static_cast<size_t>(sh.n) * sh.k);
    for (auto& v : w) {
      const double r = u(rng);
      v = r < z ? 0 : (r < z + (1 - z) / 2 ? 1 : -1);
    }
    b = cuda::pack_bitcos_gpu(w.data(), sh.n, sh.k);
    auto al = [](size_t x) { return (x + 255) / 256 * 256; };
    off_ro = al(b.masks.size() * 4);
    off_sg = off_ro + al(b.row_offsets.size() * 4);
    stride = off_sg + al(b.signs.size() * 4);
    copies = static_cast<int>(std::max<size_t>(1, (rotate_bytes + stride - 1) / stride));
    mem = std::make_unique<Dev>(stride * copies);
    for (int c = 0; c < copies; ++c) {
      uint8_t* p = mem->as<uint8_t>() + c * stride;
      check(cudaMemcpy(p, b.masks.data(), b.masks.size() * 4, cudaMemcpyHostToDevice), "H2D");
      check(cudaMemcpy(p + off_ro, b.row_offsets.data(), b.row_offsets.size() * 4, cudaMemcpyHostToDevice), "H2D");
      check(cudaMemcpy(p + off_sg, b.signs.data(), b.signs.size() * 4, cudaMemcpyHostToDevice), "H2D");
    }
  }
  void gemv(int copy, const int8_t* xq, const float* inv_s, int M, const cuda::TernaryEpilogue& ep,
            cudaStream_t st) const {
    const uint8_t* p = mem->as<uint8_t>() + static_cast<size_t>(copy % copies) * stride;
    cuda::ternary_bitcos_gemv(reinterpret_cast<const uint32_t*>(p), reinterpret_cast<const uint32_t*>(p + off_ro),
                              reinterpret_cast<const uint32_t*>(p + off_sg), static_cast<int>(b.n),
                              static_cast<int>(b.kp), xq, inv_s, M, ep, st);
  }
};
}  // namespace

double cuda_copy_bandwidth_gbs(int device) {
  check(cudaSetDevice(device), "cudaSetDevice");
  cudaStream_t st;
  check(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), "stream");
  const double r = copy_bw(st, 5);
  cudaStreamDestroy(st);
  return r;
}

std::string cuda_kernel_bench(const CudaKernelBenchOptions& o) {
  check(cudaSetDevice(o.device), "cudaSetDevice");
  const cuda_bench::NoDependentLaunch no_pdl;  // kernels timed one by one
  const cuda_bench::BlasStream bs;
  cudaStream_t st = bs.st;
  cublasHandle_t blas = bs.blas;
  cuda::Int8Workspace int8_ws;  // cuBLASLt handle and plans of the int8-copy rows
  std::string out;
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, o.device);
  out += fmt::format("GPU: {} ({} SMs, L2 {} MB)\n\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20);

  // Copy bandwidth: device-to-device copy of 2 GiB, bytes read + written.
  double copy_gbs = 0;
  {
    copy_gbs = copy_bw(st, o.reps);
    out += fmt::format("copy bandwidth (2 GiB device-to-device by a copy kernel, read + write): {:.0f} GB/s\n\n", copy_gbs);
  }
  // The int8 tensor-core ceiling of the GEMM rows: mma.sync m16n8k32 on register operands, 1 / 2 / 4 blocks of 8
  // warps per SM; the best of the three is the ceiling.
  double mma_tops = 0;
  {
    const int iters = 200, warps = 8;
    Dev sink(static_cast<size_t>(prop.multiProcessorCount) * 4 * sizeof(int32_t));
    std::string per;
    for (int per_sm : {1, 2, 4}) {
      const int blocks = prop.multiProcessorCount * per_sm;
      const double us = time_graph(st, 10, o.reps, [&](int) {
        cuda::mma_s8_probe(blocks, warps, iters, sink.as<int32_t>(), st);
      });
      const double tops = 2.0 * 4096.0 * 8.0 * iters * warps * blocks / (us * 1e-6) / 1e12;
      mma_tops = std::max(mma_tops, tops);
      per += fmt::format("{}{:.0f}", per.empty() ? "" : " / ", tops);
    }
    out += fmt::format("int8 mma.sync ceiling (m16n8k32 on register operands, 8 accumulators per warp; 1 / 2 / 4 "
                       "blocks of 8 warps per SM): {} TOPS\n\n", per);
  }

  struct Shape { int n, k; const char* name; };
  const Shape shapes[] = {{2560, 2560, "o 2560x2560"}, {3840, 2560, "qkv 3840x2560"},
                          {13824, 2560, "gate_up 13824x2560"}, {2560, 6912, "down 2560x6912"},
                          {128256, 2560, "lm_head 128256x2560"}};
  const std::vector<int>& batches = o.batches;
  out += "| shape (N x K) | M | ternary kernel | us (cold) | us (hot) | weight GB/s (cold) | % copy BW | cuBLAS bf16 us "
         "(cold) | us (hot) | speed-up cold (hot) | int8 TOPS (cold, % mma.sync ceiling) |\n";
  out += "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n";
  std::mt19937 rng(1);
  for (const Shape& sh : shapes) {
    const auto s = cuda::Tc2Shape::of(sh.n, sh.k);
    // Weights: random ternary (z ~ 0.35), copies rotated to exceed L2.
    std::vector<int8_t> w(static_cast<size_t>(sh.n) * sh.k);
    std::uniform_int_distribution<int> d3(0, 99);
    for (auto& v : w) { const int r = d3(rng); v = r < 35 ? 0 : (r < 68 ? 1 : -1); }
    const auto words = cuda::pack_tc2(w.data(), sh.n, sh.k);
    const size_t tbytes = words.size() * 4;
    const int tcopies = static_cast<int>(std::max<size_t>(1, (o.rotate_bytes + tbytes - 1) / tbytes));
    Dev tw(tbytes * tcopies);
    for (int c = 0; c < tcopies; ++c)
      check(cudaMemcpy(tw.as<uint8_t>() + c * tbytes, words.data(), tbytes, cudaMemcpyHostToDevice), "H2D");
    std::vector<__nv_bfloat16> wb(w.size());
    for (size_t i = 0; i < w.size(); ++i) wb[i] = __float2bfloat16_rn(static_cast<float>(w[i]));
    const size_t bbytes = wb.size() * 2;
    const int bcopies = static_cast<int>(std::max<size_t>(1, (o.rotate_bytes + bbytes - 1) / bbytes));
    Dev bw(bbytes * bcopies);
    for (int c = 0; c < bcopies; ++c)
      check(cudaMemcpy(bw.as<uint8_t>() + c * bbytes, wb.data(), bbytes, cudaMemcpyHostToDevice), "H2D");
    // tcb (bit planes for the binary MMA): the same weights, copies rotated the same way.
    const auto ts = cuda::TcbShape::of(sh.n, sh.k);
    const bool tcb_ok = cuda::tcb_supported();
    const cuda::TcbWeights tcbw = tcb_ok ? cuda::pack_tcb(w.data(), sh.n, sh.k) : cuda::TcbWeights{};
    const size_t bbytes_tcb = tcbw.words.size() * 4;
    const int tcb_copies = tcb_ok ? static_cast<int>(std::max<size_t>(1, (o.rotate_bytes + bbytes_tcb - 1) / bbytes_tcb)) : 0;
    Dev tcbw_d(std::max<size_t>(1, bbytes_tcb * tcb_copies)), tcbneg_d(std::max<size_t>(1, tcbw.neg_count.size() * 4));
    for (int c = 0; c < tcb_copies; ++c)
      check(cudaMemcpy(tcbw_d.as<uint8_t>() + c * bbytes_tcb, tcbw.words.data(), bbytes_tcb, cudaMemcpyHostToDevice),
            "H2D");
    if (tcb_ok)
      check(cudaMemcpy(tcbneg_d.p, tcbw.neg_count.data(), tcbw.neg_count.size() * 4, cudaMemcpyHostToDevice), "H2D");
    // BITCOS GEMV rows (M <= 8): random ternary weights at z = 0.36 (as 2B4T), and z = 0.9 at M = 1.
    std::unique_ptr<BitcosDev> bc36, bc90;
    if (std::any_of(batches.begin(), batches.end(), [](int M) { return M <= 8; })) {
      bc36 = std::make_unique<BitcosDev>(Shape2{sh.n, sh.k}, 0.36, 36, o.rotate_bytes);
      if (std::find(batches.begin(), batches.end(), 1) != batches.end())
        bc90 = std::make_unique<BitcosDev>(Shape2{sh.n, sh.k}, 0.9, 90, o.rotate_bytes);
    }
    for (int M : batches) {
      std::vector<int8_t> xq(static_cast<size_t>(M) * s.kp, 0);
      std::vector<__nv_bfloat16> xb(static_cast<size_t>(M) * sh.k);
      std::vector<int32_t> sum(M, 0);
      std::vector<float> inv(M, 0.01f);
      std::uniform_int_distribution<int> xd(-127, 127);
      for (int m = 0; m < M; ++m)
        for (int k = 0; k < sh.k; ++k) {
          const int v = xd(rng);
          xq[static_cast<size_t>(m) * s.kp + k] = static_cast<int8_t>(v);
          xb[static_cast<size_t>(m) * sh.k + k] = __float2bfloat16_rn(v * 0.01f);
          sum[m] += v;
        }
      Dev dxq(xq.size()), dxb(xb.size() * 2), dsum(M * 4), dinv(M * 4), dy(static_cast<size_t>(M) * sh.n * 4),
          dyb(static_cast<size_t>(M) * sh.n * 2);
      check(cudaMemcpy(dxq.p, xq.data(), xq.size(), cudaMemcpyHostToDevice), "H2D");
      check(cudaMemcpy(dxb.p, xb.data(), xb.size() * 2, cudaMemcpyHostToDevice), "H2D");
      check(cudaMemcpy(dsum.p, sum.data(), M * 4, cudaMemcpyHostToDevice), "H2D");
      check(cudaMemcpy(dinv.p, inv.data(), M * 4, cudaMemcpyHostToDevice), "H2D");
      cuda::TernaryEpilogue ep;
      ep.y = dy.as<float>();
      ep.ldy = sh.n;
      ep.seg_end[0] = ep.seg_end[1] = ep.seg_end[2] = sh.n;
      auto blas_run = [&](int copies, int i) {
        const float one = 1.f, zero = 0.f;
        const uint8_t* wp = bw.as<uint8_t>() + static_cast<size_t>(i % copies) * bbytes;
        if (cublasGemmEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, sh.n, M, sh.k, &one, wp, CUDA_R_16BF, sh.k, dxb.p,
                         CUDA_R_16BF, sh.k, &zero, dyb.p, CUDA_R_16BF, sh.n, CUBLAS_COMPUTE_32F,
                         CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS)
          fail("cublasGemmEx failed");
      };
      const double blas_cold = time_graph(st, o.launches, o.reps, [&](int i) { blas_run(bcopies, i); });
      const double blas_hot = time_graph(st, o.launches, o.reps, [&](int i) { blas_run(1, i); });
      // One table row: run(cold, i) launches the kernel on copy i (cold: copies rotated, else copy 0); bytes are
      // the weights plus the activations and outputs it moves.
      auto add_row = [&](const std::string& kname, double bytes, const std::function<void(bool, int)>& run) {
        const double cold = time_graph(st, o.launches, o.reps, [&](int i) { run(true, i); });
        const double hot = time_graph(st, o.launches, o.reps, [&](int i) { run(false, i); });
        const double gbs = bytes / (cold * 1e-6) / 1e9;
        const double tops = 2.0 * M * sh.n * static_cast<double>(sh.k) / (cold * 1e-6) / 1e12;
        out += fmt::format("| {} | {} | {} | {:.2f} | {:.2f} | {:.0f} | {:.0f}% | {:.2f} | {:.2f} | {:.2f}x ({:.2f}x) | "
                           "{:.0f} ({:.0f}%) |\n",
                           sh.name, M, kname, cold, hot, gbs, 100.0 * gbs / copy_gbs, blas_cold, blas_hot,
                           blas_cold / cold, blas_hot / hot, tops, 100.0 * tops / mma_tops);
      };
      using K = cuda::TernaryKernel;
      std::vector<std::pair<K, int>> variants;  // (kernel, lanes_or_warps: dp4a lanes per row or MMA GEMV warps)
      if (M <= 16) {
        variants = {{K::kDp4aGemv, 8}, {K::kDp4aGemv, 16}, {K::kDp4aGemv, 32},
                    {K::kMmaGemv, 4},  {K::kMmaGemv, 8},   {K::kMmaGemm, 0}};
      } else {
        variants = {{K::kMmaGemm, 0}};
      }
      if (cuda::tiled_gemm_supported()) {  // the automatic K split and the others
        const int auto_split = cuda::tiled_gemm_split_for(static_cast<int>(s.np), M, static_cast<int>(s.kp));
        variants.push_back({K::kTiledGemm, auto_split});
        for (int sp : {1, 2, 4, 8})
          if (sp != auto_split) variants.push_back({K::kTiledGemm, sp});
      }
      for (auto [kernel, lw] : variants) {
        const std::string kname =
            kernel == K::kDp4aGemv ? fmt::format("GEMV dp4a, {} lanes/row{}", lw, lw == 32 ? ", 256-thread blocks" : "")
            : kernel == K::kMmaGemv   ? fmt::format("GEMV int8 MMA, 16 rows x {} warps", lw)
            : kernel == K::kTiledGemm ? fmt::format("GEMM int8 MMA tiled 128x64, K split {}", lw)
                                      : "GEMM int8 MMA";
        add_row(kname, static_cast<double>(tbytes) + static_cast<double>(M) * (s.kp + 4.0 * sh.n), [&](bool cold, int i) {
          const uint32_t* wp =
              reinterpret_cast<const uint32_t*>(tw.as<uint8_t>() + static_cast<size_t>(cold ? i % tcopies : 0) * tbytes);
          cuda::ternary_matmul(wp, sh.n, static_cast<int>(s.np), static_cast<int>(s.kp), dxq.as<int8_t>(),
                               dsum.as<int32_t>(), dinv.as<float>(), M, ep, st, kernel, lw);
        });
      }
      // tcb rows at one token and for prefill (the rewrite to tc2 + the int8 GEMM). The backend runs the tcb kernel
      // at one token only (rows of 2-16 tokens take the rewrite + the int8 MMA GEMV), so 2-16 tokens are left out.
      if (tcb_ok && (M == 1 || M > 16)) {
        std::vector<int8_t> xk(static_cast<size_t>(M) * sh.k);
        for (int m = 0; m < M; ++m)
          for (int k = 0; k < sh.k; ++k) xk[static_cast<size_t>(m) * sh.k + k] = xq[static_cast<size_t>(m) * s.kp + k];
        const auto planes = cuda::pack_tcb_activations(xk.data(), M, sh.k);
        Dev dpl(planes.size() * 4);
        check(cudaMemcpy(dpl.p, planes.data(), planes.size() * 4, cudaMemcpyHostToDevice), "H2D");
        const std::vector<int> splits = M == 1 ? std::vector<int>{0, 2} : std::vector<int>{-1};
        const int np2 = (sh.n + 63) / 64 * 64;
        Dev scratch(M > 16 ? static_cast<size_t>(np2) * ts.kp / 4 : 4);
        Dev dxq_t(static_cast<size_t>(M) * ts.kp);  // xq with the tcb row stride (kp multiple of 256)
        check(cudaMemset(dxq_t.p, 0, static_cast<size_t>(M) * ts.kp), "memset");
        check(cudaMemcpy2D(dxq_t.p, ts.kp, dxq.p, s.kp, sh.k, M, cudaMemcpyDeviceToDevice), "D2D");
        for (int ks : splits) {
          const std::string kname = ks < 0    ? std::string("tcb: rewrite as tc2 + GEMM int8 MMA")
                                    : ks == 0 ? std::string("tcb binary MMA, auto")
                                              : fmt::format("tcb binary MMA, ksplit {}", ks);
          add_row(kname, static_cast<double>(bbytes_tcb) + static_cast<double>(M) * (ts.kp + 4.0 * sh.n),
                  [&](bool cold, int i) {
                    const uint32_t* wp = reinterpret_cast<const uint32_t*>(
                        tcbw_d.as<uint8_t>() + static_cast<size_t>(cold ? i % tcb_copies : 0) * bbytes_tcb);
                    if (ks >= 0) {
                      cuda::tcb_matmul(wp, tcbneg_d.as<int32_t>(), sh.n, static_cast<int>(ts.kp),
                                       dpl.as<uint32_t>(), dinv.as<float>(), M, ep, st, ks);
                    } else {  // the backend's path for many tokens: rewrite as tc2, then the int8 MMA GEMM
                      cuda::tcb_to_tc2(wp, sh.n, static_cast<int>(ts.kp), scratch.as<uint32_t>(), np2, st);
                      cuda::ternary_matmul(scratch.as<uint32_t>(), sh.n, np2, static_cast<int>(ts.kp),
                                           dxq_t.as<int8_t>(), dsum.as<int32_t>(), dinv.as<float>(), M, ep, st,
                                           cuda::TernaryKernel::kMmaGemm, 0, /*weights_from_stream=*/true);
                    }
                  });
        }
      }
      // The same weights held as int8 codes (4x the bytes of tc2) through cuBLASLt's int8 tensor-core GEMM: the
      // integer product only (int32 out, no epilogue), the bound of serving batches from an int8 copy.
      if (M > 16) {
        const int np16 = (sh.n + 15) / 16 * 16;
        const size_t ibytes = static_cast<size_t>(np16) * s.kp;
        const int icopies = static_cast<int>(std::max<size_t>(1, (o.rotate_bytes + ibytes - 1) / ibytes));
        std::vector<int8_t> wi(ibytes, 0);
        for (int n = 0; n < sh.n; ++n)
          for (int k = 0; k < sh.k; ++k) wi[static_cast<size_t>(n) * s.kp + k] = w[static_cast<size_t>(n) * sh.k + k];
        Dev dwi(ibytes * icopies), dxq16(static_cast<size_t>(M + 16) * s.kp),
            dacc(static_cast<size_t>(M + 16) * np16 * 4);
        for (int c = 0; c < icopies; ++c)
          check(cudaMemcpy(dwi.as<uint8_t>() + c * ibytes, wi.data(), ibytes, cudaMemcpyHostToDevice), "H2D");
        check(cudaMemset(dxq16.p, 0, static_cast<size_t>(M + 16) * s.kp), "memset");
        check(cudaMemcpy(dxq16.p, dxq.p, xq.size(), cudaMemcpyDeviceToDevice), "D2D");
        add_row("int8 copy: cuBLASLt s8s8s32 GEMM (no epilogue)", static_cast<double>(ibytes) + M * (s.kp + 4.0 * sh.n),
                [&](bool cold, int i) {
                  int8_ws.gemm(dwi.as<int8_t>() + static_cast<size_t>(cold ? i % icopies : 0) * ibytes, np16,
                               static_cast<int>(s.kp), dxq16.as<int8_t>(), M, dacc.as<int32_t>(), np16, st, 2);
                });
      }
      for (const BitcosDev* bc : {bc36.get(), M == 1 ? bc90.get() : nullptr}) {
        if (!bc || M > 8) continue;
        const double z = 1.0 - static_cast<double>(bc->b.nonzeros) / (static_cast<double>(sh.n) * sh.k);
        add_row(fmt::format("GEMV BITCOS dp4a, z {:.2f} ({:.3f} bits/weight)", z, bc->b.bits_per_weight()),
                static_cast<double>(bc->b.bytes()) + static_cast<double>(M) * (s.kp + 4.0 * sh.n),
                [&](bool cold, int i) { bc->gemv(cold ? i : 0, dxq.as<int8_t>(), dinv.as<float>(), M, ep, st); });
      }
    }
  }
  // Row-wise kernels at the 2B4T widths.
  out += "\n| kernel | shape | us (hot) |\n| --- | --- | ---: |\n";
  for (int M : {1, 16, 512}) {
    for (int D : {2560, 6912}) {
      const int kp = D;
      Dev x(static_cast<size_t>(M) * 2 * D * 4), wgt(D * 4), q(static_cast<size_t>(M) * kp), inv(M * 4),
          sq(M * 4), act(static_cast<size_t>(M) * D * 4);
      check(cudaMemset(x.p, 0x3c, static_cast<size_t>(M) * 2 * D * 4), "memset");
      check(cudaMemset(wgt.p, 0x3c, D * 4), "memset");
      const double us = time_graph(st, o.launches, o.reps, [&](int) {
        cuda::norm_quant(x.as<float>(), D, nullptr, wgt.as<float>(), M, D, 1e-5f, nullptr, q.as<int8_t>(), kp,
                         inv.as<float>(), sq.as<int32_t>(), st);
      });
      out += fmt::format("| RMSNorm + int8 quantization | {} x {} | {:.2f} |\n", M, D, us);
      if (M <= 16 && cuda::tcb_supported()) {  // the same kernel also writing the tcb activation bit planes
        Dev planes(static_cast<size_t>(M) * (kp / 4) * 4);
        const double up = time_graph(st, o.launches, o.reps, [&](int) {
          cuda::norm_quant(x.as<float>(), D, nullptr, wgt.as<float>(), M, D, 1e-5f, nullptr, q.as<int8_t>(), kp,
                           inv.as<float>(), sq.as<int32_t>(), st, planes.as<uint32_t>());
        });
        out += fmt::format("| RMSNorm + int8 quantization + tcb bit planes | {} x {} | {:.2f} |\n", M, D, up);
      }
      if (D != 6912) continue;
      const double g2 = time_graph(st, o.launches, o.reps, [&](int) {
        cuda::glu(x.as<float>(), M, D, true, act.as<float>(), st);
        cuda::norm_quant(act.as<float>(), D, nullptr, wgt.as<float>(), M, D, 1e-5f, nullptr, q.as<int8_t>(), kp,
                         inv.as<float>(), sq.as<int32_t>(), st);
      });
      out += fmt::format("| relu2 GLU, then RMSNorm + int8 quantization (two kernels) | {} x {} | {:.2f} |\n", M, D,
                         g2);
      const double g1 = time_graph(st, o.launches, o.reps, [&](int) {
        cuda::glu_norm_quant(x.as<float>(), M, D, true, wgt.as<float>(), 1e-5f, act.as<float>(), q.as<int8_t>(), kp,
                             inv.as<float>(), sq.as<int32_t>(), st);
      });
      out += fmt::format("| relu2 GLU + RMSNorm + int8 quantization (one kernel) | {} x {} | {:.2f} |\n", M, D, g1);
    }
  }
  for (int ctx : {64, 128, 192, 256, 1024}) {
    for (int M : {1, 16, 64, 256}) {
      const int H = 20, KVH = 5, D = 128, bs = 16, qkvw = H * D + 2 * KVH * D;
      const int nb = M * ((ctx + bs - 1) / bs), btw = (ctx + bs - 1) / bs;
      Dev q(static_cast<size_t>(M) * qkvw * 4), kp(static_cast<size_t>(nb) * bs * KVH * D * 4),
          vp(static_cast<size_t>(nb) * bs * KVH * D * 4), o2(static_cast<size_t>(M) * H * D * 4);
      check(cudaMemset(q.p, 0, static_cast<size_t>(M) * qkvw * 4), "memset");
      check(cudaMemset(kp.p, 0, static_cast<size_t>(nb) * bs * KVH * D * 4), "memset");
      check(cudaMemset(vp.p, 0, static_cast<size_t>(nb) * bs * KVH * D * 4), "memset");
      std::vector<int32_t> pos(M, ctx - 1), seq(M), bt(static_cast<size_t>(M) * btw);
      for (int m = 0; m < M; ++m) seq[m] = m;
      for (size_t i = 0; i < bt.size(); ++i) bt[i] = static_cast<int32_t>(i);
      Dev dpos(M * 4), dseq(M * 4), dbt(bt.size() * 4);
      check(cudaMemcpy(dpos.p, pos.data(), M * 4, cudaMemcpyHostToDevice), "H2D");
      check(cudaMemcpy(dseq.p, seq.data(), M * 4, cudaMemcpyHostToDevice), "H2D");
      check(cudaMemcpy(dbt.p, bt.data(), bt.size() * 4, cudaMemcpyHostToDevice), "H2D");
      const double us = time_graph(st, o.launches, o.reps, [&](int) {
        cuda::attention_paged(q.as<float>(), qkvw, M, H, KVH, D, dpos.as<int32_t>(), dseq.as<int32_t>(),
                              dbt.as<int32_t>(), btw, bs, kp.as<float>(), vp.as<float>(), o2.as<float>(), st);
      });
      out += fmt::format("| paged attention decode (H 20, KVH 5, D 128) | {} seqs x ctx {} | {:.2f} |\n", M, ctx, us);
      const int ns = cuda::attention_split_count(M, H);
      if (ns > 1) {
        Dev part(static_cast<size_t>(M) * H * ns * (D + 2) * 4), cnt(static_cast<size_t>(M) * H * 4);
        check(cudaMemset(cnt.p, 0, static_cast<size_t>(M) * H * 4), "memset");
        const double us2 = time_graph(st, o.launches, o.reps, [&](int) {
          cuda::attention_paged_split(q.as<float>(), qkvw, M, H, KVH, D, dpos.as<int32_t>(), dseq.as<int32_t>(),
                                      dbt.as<int32_t>(), btw, bs, kp.as<float>(), vp.as<float>(), o2.as<float>(), ns,
                                      part.as<float>(), cnt.as<int32_t>(), st);
        });
        out += fmt::format("| split-K paged attention decode, {} chunks | {} seqs x ctx {} | {:.2f} |\n", ns, M, ctx,
                           us2);
      }
      {  // the decode step's kernel (RoPE + KV write + attention) over bf16 pools: a block per head (split-K by the
         // batch as the backend chose before) / per KV head (GQA, split by the context)
        Dev cs(static_cast<size_t>(ctx) * D / 2 * 4), kb(static_cast<size_t>(nb) * bs * KVH * D * 2),
            vb(static_cast<size_t>(nb) * bs * KVH * D * 2),
            part(static_cast<size_t>(M) * H * cuda::kAttentionMaxSplit * (D + 2) * 4), cnt(static_cast<size_t>(M) * H * 4);
        check(cudaMemset(cs.p, 0, static_cast<size_t>(ctx) * D / 2 * 4), "memset");
        check(cudaMemset(kb.p, 0x3c, static_cast<size_t>(nb) * bs * KVH * D * 2), "memset");
        check(cudaMemset(vb.p, 0x3c, static_cast<size_t>(nb) * bs * KVH * D * 2), "memset");
        check(cudaMemset(cnt.p, 0, static_cast<size_t>(M) * H * 4), "memset");
        const int ns_head = ctx > 256 ? cuda::attention_split_count(M, H) : 1, ns_gqa = cuda::attention_gqa_chunks(ctx);
        // The per-head kernel, then GQA (bf16: the tensor-core kernel): one chunk per block, all of a row's chunks in
        // one block (one warp), up to 4 chunks per block at once (a warp each), and the automatic choice (0, 0).
        struct Variant {
          bool gqa;
          int chunks_per_block, warps_per_block;
          std::string how;
        };
        const int par = std::min(ns_gqa, 4);
        std::vector<Variant> variants = {
            {false, 0, 0, fmt::format("block per head, {} chunks", ns_head)},
            {true, 1, 1, fmt::format("GQA, {} chunks, 1 per block", ns_gqa)},
            {true, cuda::kAttentionMaxSplit, 1, fmt::format("GQA, {} chunks, {} per block", ns_gqa, ns_gqa)}};
        if (par >= 2)
          variants.push_back({true, par, par, fmt::format("GQA, {} chunks, {} per block, a warp each", ns_gqa, par)});
        variants.push_back({true, 0, 0, fmt::format("GQA, {} chunks, automatic chunks per block", ns_gqa)});
        for (const Variant& v : variants) {
          const double us3 = time_graph(st, o.launches, o.reps, [&](int) {
            if (v.gqa)
              cuda::attention_decode_gqa(q.as<float>(), qkvw, M, H, KVH, D, cs.as<float>(), cs.as<float>(),
                                         dpos.as<int32_t>(), dseq.as<int32_t>(), dbt.as<int32_t>(), btw, bs, kb.p,
                                         vb.p, o2.as<float>(), ns_gqa, part.as<float>(), cnt.as<int32_t>(), st,
                                         cuda::KvElem::kBF16, 0, v.chunks_per_block, nullptr, v.warps_per_block);
            else
              cuda::attention_decode_rope_split(q.as<float>(), qkvw, M, H, KVH, D, cs.as<float>(), cs.as<float>(),
                                                dpos.as<int32_t>(), dseq.as<int32_t>(), dbt.as<int32_t>(), btw, bs,
                                                kb.p, vb.p, o2.as<float>(), ns_head, part.as<float>(),
                                                cnt.as<int32_t>(), st, cuda::KvElem::kBF16);
          });
          out +=
              fmt::format("| fused decode attention, bf16 KV, {} | {} seqs x ctx {} | {:.2f} |\n", v.how, M, ctx, us3);
        }
      }
    }
  }
  {  // prefill: one sequence of 512 rows at positions 0..511
    const int H = 20, KVH = 5, D = 128, bs = 16, qkvw = H * D + 2 * KVH * D, T = 512, btw = T / bs;
    Dev q(static_cast<size_t>(T) * qkvw * 4), kp(static_cast<size_t>(T) * KVH * D * 4),
        vp(static_cast<size_t>(T) * KVH * D * 4), o2(static_cast<size_t>(T) * H * D * 4);
    check(cudaMemset(q.p, 0, static_cast<size_t>(T) * qkvw * 4), "memset");
    check(cudaMemset(kp.p, 0, static_cast<size_t>(T) * KVH * D * 4), "memset");
    check(cudaMemset(vp.p, 0, static_cast<size_t>(T) * KVH * D * 4), "memset");
    std::vector<int32_t> pos(T), seq(T, 0), bt(btw), tiles;
    for (int t = 0; t < T; ++t) pos[t] = t;
    for (int b = 0; b < btw; ++b) bt[b] = b;
    cuda::attention_prefill_tiles(pos.data(), seq.data(), T, cuda::attention_prefill_tile_rows(H, KVH), tiles);
    Dev dpos(T * 4), dseq(T * 4), dbt(btw * 4), dtiles(tiles.size() * 4);
    check(cudaMemcpy(dpos.p, pos.data(), T * 4, cudaMemcpyHostToDevice), "H2D");
    check(cudaMemcpy(dseq.p, seq.data(), T * 4, cudaMemcpyHostToDevice), "H2D");
    check(cudaMemcpy(dbt.p, bt.data(), btw * 4, cudaMemcpyHostToDevice), "H2D");
    check(cudaMemcpy(dtiles.p, tiles.data(), tiles.size() * 4, cudaMemcpyHostToDevice), "H2D");
    const double basic = time_graph(st, 10, o.reps, [&](int) {
      cuda::attention_paged(q.as<float>(), qkvw, T, H, KVH, D, dpos.as<int32_t>(), dseq.as<int32_t>(),
                            dbt.as<int32_t>(), btw, bs, kp.as<float>(), vp.as<float>(), o2.as<float>(), st);
    });
    out += fmt::format("| paged attention, per-row kernel (H 20, KVH 5, D 128) | prefill {} | {:.2f} |\n", T, basic);
    const double flash = time_graph(st, 10, o.reps, [&](int) {
      cuda::attention_prefill(q.as<float>(), qkvw, H, KVH, D, dpos.as<int32_t>(), dseq.as<int32_t>(),
                              dbt.as<int32_t>(), btw, bs, kp.as<float>(), vp.as<float>(), o2.as<float>(),
                              dtiles.as<int32_t>(), static_cast<int>(tiles.size() / 2), st);
    });
    out += fmt::format("| flash-style prefill attention (H 20, KVH 5, D 128) | prefill {} | {:.2f} |\n", T, flash);
  }
  return out;
}

}  // namespace tritium
#endif

#if !TRITIUM_HAVE_CUDA
#include "core/error.h"
#include "bench/cuda_kernel_bench.h"

namespace tritium {
std::string cuda_kernel_bench(const CudaKernelBenchOptions&) {
  fail("cuda-bench: this tritium was built without CUDA (configure with -DTRITIUM_CUDA=ON)");
}
double cuda_copy_bandwidth_gbs(int) { fail("cuda-bench: this tritium was built without CUDA"); }
}  // namespace tritium
#endif
