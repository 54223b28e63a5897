// tritium backend/cuda: DeviceSampler — samples rows of device logits by RowSampling (backend/device_sampling.h)
// with the kernel of kernels/cuda/sampling.h. The host packs each row's parameters, penalty entries and banned ids
// into one pinned buffer, uploaded with one copy; the results (ids, logprobs) come back with one copy into pinned
// memory. The logits stay on the device (they are modified during the kernel and restored bit for bit).
//
// Internal to the CUDA backend and its tests: only code built with TRITIUM_HAVE_CUDA includes this header.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <span>
#include <vector>

#include "backend/device_sampling.h"
#include "kernels/cuda/sampling.h"

namespace tritium::cuda_detail {

class DeviceSampler {
 public:
  DeviceSampler() = default;
  DeviceSampler(const DeviceSampler&) = delete;
  DeviceSampler& operator=(const DeviceSampler&) = delete;
  ~DeviceSampler();

  /// Samples row i of logits [rows.size(), V] (device, float32) by rows[i] on `stream` after the work already
  /// enqueued there, waits for it, and fills out (size rows.size(); inactive rows unspecified). Throws
  /// tritium::Error on a banned id outside [0, V), logprobs above kMaxDeviceTopLogprobs, or a CUDA error.
  void run(float* logits, int V, std::span<const RowSampling> rows, cudaStream_t stream,
           std::vector<SampledToken>& out);

 private:
  void* dev_ = nullptr;   // params | penalties | banned | saved penalties | saved banned | results
  void* up_ = nullptr;    // pinned: params | penalties | banned
  void* down_ = nullptr;  // pinned: results
  size_t cap_ = 0, down_cap_ = 0;
  std::vector<cuda::SampleRowParams> params_;
  std::vector<PenaltyEntry> pen_;
  std::vector<int32_t> ban_;
};

}  // namespace tritium::cuda_detail
