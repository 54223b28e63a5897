// tritium backend/cuda: DeviceArena, device allocations owned by one object and freed together (the CUDA backend's
// weights, its workspace).
//
// Internal to the CUDA backend: only code built with TRITIUM_HAVE_CUDA includes this header.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <vector>

#include "kernels/cuda/kernels.h"

namespace tritium::cuda_detail {

class DeviceArena {
 public:
  DeviceArena() = default;
  DeviceArena(const DeviceArena&) = delete;
  DeviceArena& operator=(const DeviceArena&) = delete;
  ~DeviceArena() { release(); }

  /// count elements of T, at least 256 bytes. Throws tritium::Error when cudaMalloc fails.
  template <class T>
  T* alloc(size_t count) {
    void* p = nullptr;
    cuda::check(cudaMalloc(&p, std::max<size_t>(count * sizeof(T), 256)), "cudaMalloc");
    ptrs_.push_back(p);
    return static_cast<T*>(p);
  }
  /// A device copy of host[0, count).
  template <class T>
  T* upload(const T* host, size_t count) {
    T* d = alloc<T>(count);
    cuda::check(cudaMemcpy(d, host, count * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy H2D");
    return d;
  }
  /// Frees every allocation (pointers handed out before are invalid afterwards).
  void release() {
    for (void* p : ptrs_) cudaFree(p);
    ptrs_.clear();
  }

 private:
  std::vector<void*> ptrs_;
};

}  // namespace tritium::cuda_detail
