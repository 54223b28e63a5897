// tritium bench: helpers shared by the CUDA benchmarks (cuda_kernel_bench.cpp, cuda_int8_bench.cpp).
// Only code built with TRITIUM_HAVE_CUDA includes this header.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <functional>
#include <vector>

#include "core/error.h"
#include "kernels/cuda/kernels.h"

namespace tritium::cuda_bench {

/// One cudaMalloc'ed buffer (at least 256 bytes), freed on destruction.
struct DeviceBuffer {
  void* p = nullptr;
  explicit DeviceBuffer(size_t bytes) { cuda::check(cudaMalloc(&p, std::max<size_t>(bytes, 256)), "cudaMalloc"); }
  ~DeviceBuffer() { cudaFree(p); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  template <class T>
  T* as() const { return static_cast<T*>(p); }
};

/// Programmatic dependent launch off for the scope (kernels timed one by one would overlap under it), the setting
/// restored on every exit.
struct NoDependentLaunch {
  bool was = cuda::dependent_launch();
  NoDependentLaunch() { cuda::set_dependent_launch(false); }
  ~NoDependentLaunch() { cuda::set_dependent_launch(was); }
  NoDependentLaunch(const NoDependentLaunch&) = delete;
  NoDependentLaunch& operator=(const NoDependentLaunch&) = delete;
};

/// A non-blocking stream and a cuBLAS handle on it with a 32 MB workspace, released on every exit.
struct BlasStream {
  cudaStream_t st = nullptr;
  cublasHandle_t blas = nullptr;
  DeviceBuffer ws{size_t{32} << 20};
  BlasStream() {
    cuda::check(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), "stream");
    if (cublasCreate(&blas) != CUBLAS_STATUS_SUCCESS) {
      cudaStreamDestroy(st);
      fail("cublasCreate failed");
    }
    cublasSetStream(blas, st);
    cublasSetWorkspace(blas, ws.p, size_t{32} << 20);
  }
  ~BlasStream() {
    cublasDestroy(blas);
    cudaStreamDestroy(st);
  }
  BlasStream(const BlasStream&) = delete;
  BlasStream& operator=(const BlasStream&) = delete;
};

/// GPU microseconds per call: `launches` calls of fn(i) captured in one CUDA graph, median of `reps` replays
/// (after 3 eager warm-up calls and one untimed replay). Throws tritium::Error on a CUDA error.
inline double time_graph(cudaStream_t st, int launches, int reps, const std::function<void(int)>& fn) {
  using cuda::check;
  for (int i = 0; i < 3; ++i) fn(i);  // warm-up (module load, attributes)
  check(cudaStreamSynchronize(st), "sync");
  cudaGraph_t g = nullptr;
  cudaGraphExec_t ge = nullptr;
  check(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal), "capture");
  for (int i = 0; i < launches; ++i) fn(i);
  check(cudaStreamEndCapture(st, &g), "end capture");
  check(cudaGraphInstantiate(&ge, g, 0), "instantiate");
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  check(cudaGraphLaunch(ge, st), "launch");
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    cudaEventRecord(a, st);
    check(cudaGraphLaunch(ge, st), "launch");
    cudaEventRecord(b, st);
    check(cudaEventSynchronize(b), "event sync");
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    t.push_back(ms * 1000.0 / launches);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  cudaGraphExecDestroy(ge);
  cudaGraphDestroy(g);
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace tritium::cuda_bench
