#include "executor/make_backend.h"

#include "backend/cpu/cpu_backend.h"
#include "core/env.h"
#include "core/error.h"
#include "executor/tp_launch.h"

namespace tritium {

DeviceSpec parse_device(std::string_view device, int tensor_parallel) {
  DeviceSpec s;
  s.tensor_parallel = tensor_parallel;
  if (device == "cpu") {
    s.kind = DeviceSpec::Kind::kCpu;
  } else if (device == "cuda") {
    s.kind = DeviceSpec::Kind::kCuda;
  } else if (device.rfind("cuda:", 0) == 0 && device.size() > 5 &&
             device.find_first_not_of("0123456789", 5) == std::string_view::npos && device.size() < 10) {
    s.kind = DeviceSpec::Kind::kCuda;
    s.cuda.device = std::stoi(std::string(device.substr(5)));
  } else {
    fail("--device {}: expected cpu, cuda or cuda:N", device);
  }
  TRITIUM_CHECK(tensor_parallel >= 1, "--tensor-parallel {}: must be at least 1", tensor_parallel);
  if (s.kind == DeviceSpec::Kind::kCpu && tensor_parallel > 1)
    fail("--tensor-parallel {}: needs --device cuda (tensor parallelism runs one process per GPU over NCCL)",
         tensor_parallel);
  return s;
}

std::shared_ptr<Backend> make_backend(std::shared_ptr<const Transformer> model, const DeviceSpec& spec) {
  if (spec.kind == DeviceSpec::Kind::kCpu) return std::make_shared<CpuBackend>(std::move(model));
  CudaOptions co = spec.cuda;
  if (!env::cuda_graphs()) co.graphs = false;
  if (spec.tensor_parallel > 1) return start_tensor_parallel(*model, spec.tensor_parallel, co);
  return make_cuda_backend(std::move(model), co);
}

}  // namespace tritium
