// The CUDA backend's entry points in a build without CUDA.
#if !TRITIUM_HAVE_CUDA
#include "core/error.h"
#include "backend/cuda/cuda_backend.h"

namespace tritium {

int cuda_device_count() { return 0; }

void cuda_set_dependent_launch(bool) {}
std::string cuda_device_name(int) { return ""; }
std::shared_ptr<Backend> make_cuda_backend(std::shared_ptr<const Transformer>, const CudaOptions&) {
  fail("--device cuda: this tritium was built without CUDA (configure with -DTRITIUM_CUDA=ON)");
}

}  // namespace tritium
#endif
