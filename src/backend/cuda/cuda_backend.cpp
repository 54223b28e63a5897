// tritium backend/cuda: the entry points of cuda_backend.h in a build with CUDA (cuda_backend_stub.cpp without).
// The backend itself: cuda_backend_impl.h.
#if TRITIUM_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"

#include <cuda_runtime_api.h>

#include "backend/cuda/cuda_backend_impl.h"
#include "core/error.h"
#include "kernels/cuda/kernels.h"

namespace tritium {

void cuda_set_dependent_launch(bool on) { cuda::set_dependent_launch(on); }

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

std::string cuda_device_name(int device) {
  cudaDeviceProp p{};
  if (cudaGetDeviceProperties(&p, device) != cudaSuccess) {
    cudaGetLastError();
    return "";
  }
  return p.name;
}

std::shared_ptr<Backend> make_cuda_backend(std::shared_ptr<const Transformer> model, const CudaOptions& opts) {
  TRITIUM_CHECK(cuda_device_count() > 0, "--device cuda: no CUDA device found");
  return std::make_shared<cuda_detail::CudaBackend>(std::move(model), opts);
}

}  // namespace tritium
#endif
