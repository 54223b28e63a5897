// The int8 kernel benchmark (tritium cuda-bench --int8-kernels): int8 GEMM and int8 projections vs cuBLAS bf16.
#include "bench/cuda_int8_bench.h"

#include "core/error.h"
#include "backend/cuda/cuda_backend.h"
#include "bench/cuda_kernel_bench.h"

#if !TRITIUM_HAVE_CUDA
namespace tritium {
std::string cuda_int8_kernel_bench(const CudaKernelBenchOptions&) { fail("cuda-bench: built without CUDA"); }
}  // namespace tritium
#else
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <random>
#include <vector>

#include "kernels/cuda/kernels.h"
#include "bench/cuda_bench_util.h"
#include "backend/cuda/int8_linear.h"

namespace tritium {
namespace {

using cuda::check;
using Buf = cuda_bench::DeviceBuffer;
using cuda_bench::time_graph;

}  // namespace

std::string cuda_int8_kernel_bench(const CudaKernelBenchOptions& o) {
  check(cudaSetDevice(o.device), "cudaSetDevice");
  const cuda_bench::BlasStream bs;
  cudaStream_t st = bs.st;
  cublasHandle_t blas = bs.blas;
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, o.device);
  std::string out = fmt::format("int8 projections on {} (Qwen2-1.5B MLP shapes, weights rotated over >= {} MB: cold "
                                "L2; one request; LLM.int8() with 4 outlier columns)\n\n",
                                prop.name, o.rotate_bytes >> 20);
  out += "| shape (N x K) | M | int8 variant | us | int8 weight GB/s | cuBLAS bf16 us | bf16 / int8 time |\n";
  out += "| --- | ---: | --- | ---: | ---: | ---: | ---: |\n";
  struct Shape { int n, k; const char* name; };
  const Shape shapes[] = {{8960, 1536, "gate/up 8960x1536"}, {1536, 8960, "down 1536x8960"}};
  const int batches[] = {1, 16, 512};
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const int max_rows = 512;
  for (const Shape& sh : shapes) {
    std::vector<float> w(static_cast<size_t>(sh.n) * sh.k);
    for (auto& v : w) v = 0.02f * nd(rng);
    const Int8Projection vec(Int8Method::kVectorwise, w.data(), sh.n, sh.k);
    const Int8Projection llm(Int8Method::kLlmInt8, w.data(), sh.n, sh.k);
    cuda::Int8Workspace ws;
    const size_t code_bytes = static_cast<size_t>((sh.n + 15) / 16 * 16) * ((sh.k + 15) / 16 * 16);
    const int copies = static_cast<int>(std::max<size_t>(1, (o.rotate_bytes + code_bytes - 1) / code_bytes));
    std::vector<std::unique_ptr<cuda::CudaInt8Linear>> vecs, llms;
    for (int c = 0; c < copies; ++c) vecs.push_back(std::make_unique<cuda::CudaInt8Linear>(vec, ws));
    const int llm_copies = std::max(1, copies / 3);  // codes + the transposed fp16 copy: 3 bytes per weight
    for (int c = 0; c < llm_copies; ++c) llms.push_back(std::make_unique<cuda::CudaInt8Linear>(llm, ws));
    ws.ensure(max_rows);
    // Raw codes for the GEMM-only rows (same padded layout as CudaInt8Linear).
    Buf codes(code_bytes * copies);
    check(cudaMemset(codes.p, 1, code_bytes * copies), "memset");
    const int np = (sh.n + 15) / 16 * 16, kp = (sh.k + 15) / 16 * 16;
    // bf16 weights for cuBLAS.
    std::vector<__nv_bfloat16> wb(w.size());
    for (size_t i = 0; i < w.size(); ++i) wb[i] = __float2bfloat16_rn(w[i]);
    const size_t bbytes = wb.size() * 2;
    const int bcopies = static_cast<int>(std::max<size_t>(1, (o.rotate_bytes + bbytes - 1) / bbytes));
    Buf bw(bbytes * bcopies);
    for (int c = 0; c < bcopies; ++c)
      check(cudaMemcpy(bw.as<uint8_t>() + c * bbytes, wb.data(), bbytes, cudaMemcpyHostToDevice), "H2D");
    for (int M : batches) {
      std::vector<float> x(static_cast<size_t>(M) * sh.k);
      for (auto& v : x) v = nd(rng);
      for (int m = 0; m < M; ++m)
        for (int c : {7, 100, 501, 1200}) x[static_cast<size_t>(m) * sh.k + c] = m % 2 ? 9.0f : -8.0f;
      std::vector<__nv_bfloat16> xb(x.size());
      for (size_t i = 0; i < x.size(); ++i) xb[i] = __float2bfloat16_rn(x[i]);
      Buf dx(x.size() * 4), dxb(xb.size() * 2), dy(static_cast<size_t>(M) * sh.n * 4),
          dyb(static_cast<size_t>(M) * sh.n * 2), dxq(static_cast<size_t>(M + 16) * kp),
          dacc(static_cast<size_t>(M + 16) * np * 4);
      check(cudaMemcpy(dx.p, x.data(), x.size() * 4, cudaMemcpyHostToDevice), "H2D");
      check(cudaMemcpy(dxb.p, xb.data(), xb.size() * 2, cudaMemcpyHostToDevice), "H2D");
      check(cudaMemset(dxq.p, 3, static_cast<size_t>(M + 16) * kp), "memset");
      const double bf16 = time_graph(st, o.launches, o.reps, [&](int i) {
        const float one = 1.f, zero = 0.f;
        const uint8_t* wp = bw.as<uint8_t>() + static_cast<size_t>(i % bcopies) * bbytes;
        if (cublasGemmEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, sh.n, M, sh.k, &one, wp, CUDA_R_16BF, sh.k, dxb.p,
                         CUDA_R_16BF, sh.k, &zero, dyb.p, CUDA_R_16BF, sh.n, CUBLAS_COMPUTE_32F,
                         CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS)
          fail("cublasGemmEx failed");
      });
      auto row = [&](const std::string& name, double us) {
        const double gbs = static_cast<double>(code_bytes) / (us * 1e-6) / 1e9;
        out += fmt::format("| {} | {} | {} | {:.2f} | {:.0f} | {:.2f} | {:.2f}x |\n", sh.name, M, name, us, gbs, bf16,
                           bf16 / us);
      };
      std::vector<std::pair<int, const char*>> kinds = {{2, "GEMM s8s8s32 cuBLASLt"}};
      if (M <= 16) kinds.insert(kinds.begin(), {1, "GEMM s8s8s32 dp4a"});
      for (auto [kind, name] : kinds) {
        row(name, time_graph(st, o.launches, o.reps, [&](int i) {
              ws.gemm(codes.as<int8_t>() + static_cast<size_t>(i % copies) * code_bytes, np, kp, dxq.as<int8_t>(), M,
                      dacc.as<int32_t>(), np, st, kind);
            }));
      }
      row("vector-wise forward (auto)", time_graph(st, o.launches, o.reps, [&](int i) {
            vecs[i % copies]->forward(dx.as<float>(), sh.k, M, nullptr, nullptr, dy.as<float>(), sh.n, false, ws, st);
          }));
      row("LLM.int8() forward (auto)", time_graph(st, o.launches, o.reps, [&](int i) {
            llms[i % llm_copies]->forward(dx.as<float>(), sh.k, M, nullptr, nullptr, dy.as<float>(), sh.n, false, ws,
                                          st);
          }));
    }
  }
  return out;
}

}  // namespace tritium
#endif
