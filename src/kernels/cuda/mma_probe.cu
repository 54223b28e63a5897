// tritium kernels/cuda: the int8 tensor-core probe of `cuda-bench --kernels`: warps issuing mma.sync m16n8k32 s8
// on register operands (no memory), the ceiling that the ternary GEMMs' MMAs are measured against in the same run.
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/kernels.h"

namespace tritium::cuda {
namespace {

// 8 independent accumulators per warp, so that a dependent MMA waits on its predecessor's latency only when the
// other 7 cannot cover it; volatile, so the compiler keeps every MMA.
__global__ void mma_probe_kernel(int iters, int32_t* __restrict__ sink) {
  int acc[8][4] = {};
  const uint32_t a0 = threadIdx.x * 0x01010101u, a1 = a0 ^ 0x11111111u, a2 = a0 ^ 0x22222222u, a3 = a0 ^ 0x44444444u,
                 b0 = a0 ^ 0x55555555u, b1 = a0 ^ 0x2a2a2a2au;
  for (int i = 0; i < iters; ++i) {
#pragma unroll
    for (int j = 0; j < 8; ++j)
      asm volatile(
          "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
          "{%0,%1,%2,%3};\n"
          : "+r"(acc[j][0]), "+r"(acc[j][1]), "+r"(acc[j][2]), "+r"(acc[j][3])
          : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  }
  int s = 0;
#pragma unroll
  for (int j = 0; j < 8; ++j) s += acc[j][0] + acc[j][1] + acc[j][2] + acc[j][3];
  if (threadIdx.x == 0) sink[blockIdx.x] = s;
}

}  // namespace

void mma_s8_probe(int blocks, int warps, int iters, int32_t* sink, cudaStream_t stream) {
  if (blocks <= 0 || warps <= 0 || warps > 32 || iters <= 0)
    check(cudaErrorInvalidValue, "mma_s8_probe (blocks > 0, 1-32 warps, iters > 0)");
  mma_probe_kernel<<<blocks, warps * 32, 0, stream>>>(iters, sink);
  check_launch("mma_s8_probe");
}

}  // namespace tritium::cuda
