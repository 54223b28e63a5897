// Helpers of the CUDA kernel tests (test_cuda_kernels.cpp, test_cuda_attention.cpp): device buffers poisoned at
// allocation, random inputs, and the skip of a machine without a GPU. CUDA builds only.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <random>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "kernels/cuda/kernels.h"

namespace tritium::test {

#define REQUIRE_GPU() \
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device: CUDA kernel test skipped"

/// A device array of `count` T, filled with 0xA5 bytes (so an element a kernel fails to write shows), copied up and
/// down synchronously.
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

/// n normal floats of standard deviation `scale`.
inline std::vector<float> random_floats(std::mt19937& rng, size_t n, float scale = 1.0f) {
  std::normal_distribution<float> d(0, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

}  // namespace tritium::test
