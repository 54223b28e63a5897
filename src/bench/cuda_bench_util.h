// tritium bench: helpers shared by the CUDA benchmarks (cuda_kernel_bench.cpp, cuda_int8_bench.cpp).
// Only code built with TRITIUM_HAVE_CUDA includes this header.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <functional>
#include <vector>

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
