// tritium kernels/cuda: the empty kernel whose attributes say whether this binary carries GPU code that the
// current device can run (require_kernel_image in cuda_check.cpp).
#include <cuda_runtime.h>

#include "kernels/cuda/kernels.h"

namespace tritium::cuda {
namespace {
__global__ void arch_probe_kernel() {}
}  // namespace

cudaError_t probe_kernel_image() {
  cudaFuncAttributes a{};
  const cudaError_t err = cudaFuncGetAttributes(&a, arch_probe_kernel);
  cudaGetLastError();  // the error is returned, not left sticky for the next check
  return err;
}

}  // namespace tritium::cuda
