// The group-scaled ternary kernel benchmark (tritium cuda-bench --grouped-kernels): Qwen3-8B shapes.
#include "bench/cuda_grouped_bench.h"

#if TRITIUM_HAVE_CUDA
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <random>
#include <vector>

#include "backend/cuda/int8_linear.h"
#include "bench/cuda_bench_util.h"
#include "bench/cuda_kernel_bench.h"
#include "core/error.h"
#include "formats/ternary_tc2.h"
#include "kernels/cuda/kernels.h"

namespace tritium {
namespace {

using cuda::check;
using Dev = cuda_bench::DeviceBuffer;
using cuda_bench::time_graph;

/// `copies` copies of host bytes on the device, each `stride` bytes apart (stride >= bytes, 256-aligned).
struct Rotated {
  size_t bytes = 0, stride = 0;
  int copies = 1;
  std::unique_ptr<Dev> mem;
  Rotated(const void* host, size_t n, size_t rotate_bytes) : bytes(n), stride((n + 255) / 256 * 256) {
    copies = static_cast<int>(std::max<size_t>(1, (rotate_bytes + stride - 1) / stride));
    mem = std::make_unique<Dev>(stride * copies);
    for (int c = 0; c < copies; ++c)
      check(cudaMemcpy(mem->as<uint8_t>() + c * stride, host, n, cudaMemcpyHostToDevice), "H2D");
  }
  template <class T>
  const T* at(int i) const {
    return reinterpret_cast<const T*>(mem->as<uint8_t>() + static_cast<size_t>(i % copies) * stride);
  }
};

}  // namespace

std::string cuda_grouped_kernel_bench(const CudaKernelBenchOptions& o) {
  check(cudaSetDevice(o.device), "cudaSetDevice");
  const cuda_bench::NoDependentLaunch no_pdl;  // kernels timed one by one
  const cuda_bench::BlasStream bs;
  cudaStream_t st = bs.st;
  cublasHandle_t blas = bs.blas;
  cuda::Int8Workspace int8_ws;
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, o.device);
  const double copy_gbs = cuda_copy_bandwidth_gbs(o.device);
  std::string out = fmt::format("GPU: {} ({} SMs); copy bandwidth {:.0f} GB/s (read + write)\n\n", prop.name,
                                prop.multiProcessorCount, copy_gbs);
  out += "| shape (N x K) | M | group-scaled ternary us (cold) | us (hot) | weight GB/s (cold) | % copy BW | cuBLASLt "
         "int8 over an int8 copy us (cold) | ratio | cuBLAS bf16 us (cold) | ratio | tilings us (cold): dp4a groups per round, "
         "mma token x row tiles |\n";
  out += "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n";
  struct Shape { int n, k; const char* name; };
  const Shape shapes[] = {{6144, 4096, "qkv 6144x4096"}, {4096, 4096, "o 4096x4096"},
                          {24576, 4096, "gate_up 24576x4096"}, {4096, 12288, "down 4096x12288"}};
  std::mt19937 rng(8);
  for (const Shape& sh : shapes) {
    const auto s = cuda::Tc2Shape::of(sh.n, sh.k);
    const int G = (sh.k + 127) / 128;
    std::vector<int8_t> w(static_cast<size_t>(sh.n) * sh.k);
    std::uniform_int_distribution<int> d100(0, 99);
    for (auto& v : w) { const int r = d100(rng); v = r < 42 ? 0 : (r < 71 ? 1 : -1); }
    std::vector<float> gs(static_cast<size_t>(sh.n) * G);
    std::uniform_real_distribution<float> gd(0.005f, 0.05f);
    for (auto& g : gs) g = gd(rng);
    const auto words = cuda::pack_tc2(w.data(), sh.n, sh.k);
    // tc2 codes and their scales side by side in each copy, as one layer's weights.
    const size_t cbytes = words.size() * 4, sbytes = gs.size() * 4;
    std::vector<uint8_t> host(cbytes + sbytes);
    std::copy_n(reinterpret_cast<const uint8_t*>(words.data()), cbytes, host.data());
    std::copy_n(reinterpret_cast<const uint8_t*>(gs.data()), sbytes, host.data() + cbytes);
    const Rotated tern(host.data(), host.size(), o.rotate_bytes);
    const int np16 = (sh.n + 15) / 16 * 16;
    std::vector<int8_t> wi(static_cast<size_t>(np16) * s.kp, 0);
    for (int n = 0; n < sh.n; ++n)
      std::copy_n(w.data() + static_cast<size_t>(n) * sh.k, sh.k, wi.data() + static_cast<size_t>(n) * s.kp);
    const Rotated i8(wi.data(), wi.size(), o.rotate_bytes);
    std::vector<__nv_bfloat16> wb(w.size());
    for (size_t i = 0; i < w.size(); ++i) wb[i] = __float2bfloat16_rn(static_cast<float>(w[i]));
    const Rotated bf(wb.data(), wb.size() * 2, o.rotate_bytes);
    for (int M : o.batches) {
      std::vector<int8_t> xq(static_cast<size_t>(M + 16) * s.kp, 0);
      std::uniform_int_distribution<int> xd(-127, 127);
      for (int m = 0; m < M; ++m)
        for (int k = 0; k < sh.k; ++k) xq[static_cast<size_t>(m) * s.kp + k] = static_cast<int8_t>(xd(rng));
      std::vector<float> inv(M, 0.01f);
      Dev dxq(xq.size()), dinv(M * 4), dy(static_cast<size_t>(M) * sh.n * 4), dacc(static_cast<size_t>(M + 16) * np16 * 4),
          dxb(static_cast<size_t>(M) * sh.k * 2), dyb(static_cast<size_t>(M) * sh.n * 2);
      check(cudaMemcpy(dxq.p, xq.data(), xq.size(), cudaMemcpyHostToDevice), "H2D");
      check(cudaMemcpy(dinv.p, inv.data(), M * 4, cudaMemcpyHostToDevice), "H2D");
      check(cudaMemset(dxb.p, 0, static_cast<size_t>(M) * sh.k * 2), "memset");
      cuda::TernaryEpilogue ep;
      ep.y = dy.as<float>();
      ep.ldy = sh.n;
      auto grouped = [&](bool cold, int tm, int nt) {
        return time_graph(st, o.launches, o.reps, [&](int i) {
          const uint8_t* p = tern.at<uint8_t>(cold ? i : 0);
          cuda::ternary_grouped_matmul(reinterpret_cast<const uint32_t*>(p), reinterpret_cast<const float*>(p + cbytes),
                                       nullptr, sh.n, static_cast<int>(s.np), sh.k, static_cast<int>(s.kp),
                                       dxq.as<int8_t>(), dinv.as<float>(), M, ep, st, tm, nt);
        });
      };
      const double cold = grouped(true, 0, 0), hot = grouped(false, 0, 0);
      // Each kernel and tiling (cold) beside the automatic choice: up to 8 tokens the dp4a kernel with 1 or 2
      // groups per lane and round and the tensor-core kernel's narrow warp tiles, above its every warp tiling.
      std::string sweep;
      if (M > 8)
        for (int tm : {1, 2})
          for (int nt : {1, 2, 4})
            sweep += fmt::format("{}{}x{} {:.1f}", sweep.empty() ? "" : ", ", tm, nt, grouped(true, tm, nt));
      else
        for (auto [a, b] : {std::pair{1, 0}, {2, 0}, {1, 1}, {1, 2}})
          sweep += fmt::format("{}{} {:.1f}", sweep.empty() ? "" : ", ",
                               b == 0 ? fmt::format("dp4a d{}", a) : fmt::format("mma {}x{}", a, b), grouped(true, a, b));
      const double int8_us = time_graph(st, o.launches, o.reps, [&](int i) {
        int8_ws.gemm(i8.at<int8_t>(i), np16, static_cast<int>(s.kp), dxq.as<int8_t>(), M, dacc.as<int32_t>(), np16, st,
                     2);
      });
      const double bf16_us = time_graph(st, o.launches, o.reps, [&](int i) {
        const float one = 1.f, zero = 0.f;
        if (cublasGemmEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, sh.n, M, sh.k, &one, bf.at<uint8_t>(i), CUDA_R_16BF, sh.k,
                         dxb.p, CUDA_R_16BF, sh.k, &zero, dyb.p, CUDA_R_16BF, sh.n, CUBLAS_COMPUTE_32F,
                         CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS)
          fail("cublasGemmEx failed");
      });
      const double gbs = static_cast<double>(host.size()) / (cold * 1e-6) / 1e9;
      out += fmt::format("| {} | {} | {:.2f} | {:.2f} | {:.0f} | {:.0f}% | {:.2f} | {:.2f}x | {:.2f} | {:.2f}x | {} |\n",
                         sh.name, M, cold, hot, gbs, 100.0 * gbs / copy_gbs, int8_us, int8_us / cold, bf16_us,
                         bf16_us / cold, sweep);
    }
  }
  return out;
}

}  // namespace tritium
#else
#include "core/error.h"

namespace tritium {
std::string cuda_grouped_kernel_bench(const CudaKernelBenchOptions&) {
  fail("cuda-bench: this tritium was built without CUDA (configure with -DTRITIUM_CUDA=ON)");
}
}  // namespace tritium
#endif
