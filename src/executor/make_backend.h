// tritium executor: where a loaded model runs. One entry point, make_backend(), builds the backend a device
// specification names: the CPU forward (backend/cpu), the whole forward on one NVIDIA GPU (backend/cuda), or a
// tensor-parallel group of GPU processes over NCCL (executor/tp_launch.h).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"

namespace tritium {

struct DeviceSpec {
  enum class Kind { kCpu, kCuda };
  Kind kind = Kind::kCpu;
  /// GPUs the model is split over (one process each); > 1 needs kCuda. Rank r uses GPU cuda.device + r.
  int tensor_parallel = 1;
  /// Options of the CUDA backend (cuda.device: the GPU index of "cuda:N").
  CudaOptions cuda;
};

/// Parses "cpu", "cuda" or "cuda:N" and a tensor-parallel size (>= 1). Throws tritium::Error naming the
/// bad value ("--device X: expected cpu, cuda or cuda:N"; tensor parallelism without CUDA).
DeviceSpec parse_device(std::string_view device, int tensor_parallel = 1);

/// The backend of `spec` for `model` (kept alive by the backend; a tensor-parallel group keeps only rank 0's
/// shard, so the caller may drop the full model afterwards). CUDA graphs follow TRITIUM_CUDA_GRAPHS
/// (core/env.h). Throws tritium::Error when the device is missing or the model cannot run there.
std::shared_ptr<Backend> make_backend(std::shared_ptr<const Transformer> model, const DeviceSpec& spec);

}  // namespace tritium
