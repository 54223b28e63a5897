// Error checking for the CUDA wrappers (a .cpp so that the .cu files need no fmt).
#if TRITIUM_HAVE_CUDA
#include <cuda_runtime_api.h>

#include <atomic>
#include <string>

#include "core/error.h"
#include "kernels/cuda/kernels.h"

namespace tritium::cuda {

void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) fail("CUDA error in {}: {}", what, cudaGetErrorString(err));
}

void check_launch(const char* what) { check(cudaGetLastError(), what); }

namespace {
std::atomic<bool> g_dependent_launch{true};

/// Programmatic dependent launch needs compute capability 9.0 (Hopper); on A100 / A10-class GPUs (sm_80 / sm_86)
/// kernels launch ordinarily (their griddepcontrol instructions compile to nothing there).
bool device_supports_pdl() {
  static const bool ok = [] {
    int dev = 0, major = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess) {
      cudaGetLastError();
      return false;
    }
    return major >= 9;
  }();
  return ok;
}
}  // namespace

int sm_count() {
  // Asked once per device: the launchers call it on every launch.
  static std::atomic<int> known[64];  // 0: not asked yet
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) {
    cudaGetLastError();
    return 132;
  }
  const bool cached = dev >= 0 && dev < 64;
  if (cached) {
    if (const int k = known[dev].load(std::memory_order_relaxed)) return k;
  }
  int sms = 0;
  if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || sms <= 0) {
    cudaGetLastError();
    sms = 132;
  }
  if (cached) known[dev].store(sms, std::memory_order_relaxed);
  return sms;
}

// A kernel whose image is missing fails only at its first launch ("no kernel image is available"), deep inside a
// forward; asking once at start-up gives the user one line naming the device and the configure flag instead.
const char* built_architectures() {
#ifdef TRITIUM_CUDA_ARCHS
  return TRITIUM_CUDA_ARCHS;
#else
  return "unknown";
#endif
}

void require_kernel_image(int device) {
  cudaDeviceProp p{};
  check(cudaGetDeviceProperties(&p, device), "cudaGetDeviceProperties");
  const std::string cc = std::to_string(p.major) + std::to_string(p.minor);
  if (p.major < 8)
    fail("CUDA device {} ({}) is sm_{}: tritium's GPU kernels need sm_80 (Ampere) or newer; use --device cpu", device,
         p.name, cc);
  int cur = 0;
  check(cudaGetDevice(&cur), "cudaGetDevice");
  check(cudaSetDevice(device), "cudaSetDevice");
  const cudaError_t err = probe_kernel_image();
  check(cudaSetDevice(cur), "cudaSetDevice");
  if (err == cudaErrorNoKernelImageForDevice || err == cudaErrorInvalidDeviceFunction ||
      err == cudaErrorUnsupportedPtxVersion || err == cudaErrorInvalidPtx)
    fail("CUDA device {} ({}) is sm_{}, but this binary has GPU code for the architectures '{}' only: "
         "configure with -DCMAKE_CUDA_ARCHITECTURES={} (or add {} to the list) and rebuild",
         device, p.name, cc, built_architectures(), cc, cc);
  check(err, "kernel image check");
}

void set_dependent_launch(bool on) { g_dependent_launch.store(on); }
bool dependent_launch() { return g_dependent_launch.load() && device_supports_pdl(); }

}  // namespace tritium::cuda
#endif
