// tritium kernels/cuda: kernel launches with programmatic dependent launch (PDL, sm_90).
//
// A kernel launched through launch() on a non-null stream while dependent_launch() is on carries
// cudaLaunchAttributeProgrammaticStreamSerialization: the GPU may start it before the previous kernel of the
// stream has finished, as soon as every block of that kernel has called pdl_trigger(). Such a kernel must call
// pdl_wait() before it reads anything an earlier kernel wrote and before it writes anything; only constant data
// (weights, tables) may be read before (a kernel whose early reads the previous kernel wrote is launched with
// launch_pdl(false, ...)). pdl_wait() returns once the previous grid has completed and its memory is visible, and
// since that grid itself waited on its predecessor, the whole stream order is kept.
// On the null stream (the tests) and when dependent_launch() is off, launches are ordinary.
#pragma once

#include <cuda_runtime.h>

#include <utility>

#include "kernels/cuda/kernels.h"

namespace tritium::cuda {

/// Waits for the preceding kernel of the stream (griddepcontrol.wait; a no-op before sm_90 or without PDL).
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

/// Lets the next kernel of the stream start launching (griddepcontrol.launch_dependents).
__device__ __forceinline__ void pdl_trigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" :::);
#endif
}

/// kernel<<<grid, block, smem, st>>>(args...), with the PDL attribute as described above when `pdl` is true, else
/// ordinary (the kernel starts once the stream's earlier work has completed: for a kernel that reads, before its
/// pdl_wait(), data that the previous kernel wrote); checks the launch.
template <class... KArgs, class... Args>
void launch_pdl(bool pdl, void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t st,
                const char* what, Args&&... args) {
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = st;
  cfg.attrs = attr;
  cfg.numAttrs = (pdl && st != nullptr && dependent_launch()) ? 1 : 0;
  check(cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...), what);
}

/// launch_pdl(true, ...): every kernel whose pre-wait reads are constant data.
template <class... KArgs, class... Args>
void launch(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t st, const char* what,
            Args&&... args) {
  launch_pdl(true, kernel, grid, block, smem, st, what, std::forward<Args>(args)...);
}

}  // namespace tritium::cuda
