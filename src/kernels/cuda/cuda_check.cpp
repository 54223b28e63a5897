// Error checking for the CUDA wrappers (a .cpp so that the .cu files need no fmt).
#if TRITIUM_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "core/error.h"
#include "kernels/cuda/kernels.h"

namespace tritium::cuda {

void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) fail("CUDA error in {}: {}", what, cudaGetErrorString(err));
}

void check_launch(const char* what) { check(cudaGetLastError(), what); }

}  // namespace tritium::cuda
#endif
