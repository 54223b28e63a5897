// Error checking for the CUDA wrappers (a .cpp so that the .cu files need no fmt).
#if TRITIUM_HAVE_CUDA
#include <cuda_runtime_api.h>

#include <atomic>

#include "core/error.h"
#include "kernels/cuda/kernels.h"

namespace tritium::cuda {

void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) fail("CUDA error in {}: {}", what, cudaGetErrorString(err));
}

void check_launch(const char* what) { check(cudaGetLastError(), what); }

namespace {
std::atomic<bool> g_dependent_launch{true};
}  // namespace

void set_dependent_launch(bool on) { g_dependent_launch.store(on); }
bool dependent_launch() { return g_dependent_launch.load(); }

}  // namespace tritium::cuda
#endif
