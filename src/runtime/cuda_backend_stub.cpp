// The CUDA backend's entry points in a build without CUDA.
#if !TRITIUM_HAVE_CUDA
#include "core/error.h"
#include "runtime/cuda_backend.h"

namespace tritium {

int cuda_device_count() { return 0; }

void cuda_set_dependent_launch(bool) {}
std::string cuda_device_name(int) { return ""; }
std::shared_ptr<ForwardBackend> make_cuda_backend(const Transformer&, const CudaOptions&) {
  fail("--device cuda: this tritium was built without CUDA (configure with -DTRITIUM_CUDA=ON)");
}

}  // namespace tritium
#endif
#if !TRITIUM_HAVE_CUDA
namespace tritium {
std::string cuda_kernel_bench(const CudaKernelBenchOptions&) {
  fail("cuda-bench: this tritium was built without CUDA (configure with -DTRITIUM_CUDA=ON)");
}
double cuda_copy_bandwidth_gbs(int) { fail("cuda-bench: this tritium was built without CUDA"); }
}  // namespace tritium
#endif
