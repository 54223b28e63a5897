// tritium kernels/cuda: device pieces of the tcb GEMV (ternary_tcb.cu) over the tcb layout (ternary_tcb.h): the
// binary tensor-core MMA and the combination of its 8 bit-plane columns into the exact dot product.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace tritium::cuda {

/// D (16 x 8, s32) += popc(A (16 x 256 bits, row) AND B (256 x 8 bits, col)) per output
/// (mma.sync.m16n8k256.row.col.s32.b1.b1.s32.and.popc; sm_80+, traps below).
__device__ __forceinline__ void bmma_and(int (&d)[4], const uint4& a, uint32_t b0, uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile(
      "mma.sync.aligned.m16n8k256.row.col.s32.b1.b1.s32.and.popc {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
      : "r"(a.x), "r"(a.y), "r"(a.z), "r"(a.w), "r"(b0), "r"(b1));
#else
  __trap();  // the host wrappers refuse devices below sm_80
#endif
}

/// The accumulator of a warp's 16-row tile (P plane times the activation planes plus N plane times their
/// complement, ternary_tcb.h) reduced to the sums of rows g = lane / 4 (lo) and g + 8 (hi), without the row's
/// -1 count: columns 2t and 2t + 1 (t = lane % 4) are bit planes j of weight 2^j (-2^7 for j = 7), summed over the
/// four lanes of a row. Every lane gets its rows' values.
__device__ __forceinline__ void tcb_rows(const int (&acc)[4], int& lo, int& hi) {
  const int t = static_cast<int>(threadIdx.x) % 4;
  const int w0 = 1 << (2 * t), w1 = t == 3 ? -128 : 1 << (2 * t + 1);
  lo = w0 * acc[0] + w1 * acc[1];
  hi = w0 * acc[2] + w1 * acc[3];
#pragma unroll
  for (int off = 1; off < 4; off *= 2) {
    lo += __shfl_xor_sync(0xffffffffu, lo, off);
    hi += __shfl_xor_sync(0xffffffffu, hi, off);
  }
}

}  // namespace tritium::cuda
