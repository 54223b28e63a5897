// tritium kernels/cuda: device pieces shared by the kernels over tc2 ternary codes (ternary.cu, ternary_gemm.cu,
// ternary_grouped.cu): the code mask, dp4a with unsigned codes and the int8 tensor-core MMA. Device code only.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace tritium::cuda {

/// Code group 0 of a tc2 word: bits 0-1 of each byte. Group g is (word >> 2g) & kTc2Mask, or word & (mask << 2g)
/// (the codes times 4^g).
constexpr uint32_t kTc2Mask = 0x03030303u;

/// dp4a with unsigned 8-bit codes in the first operand and signed int8 activations (dp4a.u32.s32): the masked
/// group g of a tc2 word holds c * 4^g, up to 128, which does not fit a signed byte.
__device__ __forceinline__ int dp4a_us(uint32_t a, int b, int c) {
  int d;
  asm("dp4a.u32.s32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}

/// d (16 x 8, s32) += A (16 x 32, s8, row) x B (32 x 8, s8, col): mma.sync.m16n8k32 (sm_80+). Thread (g, t) =
/// (lane / 4, lane % 4) holds A bytes k 4t .. + 3 of rows g (a0) and g + 8 (a1), k 16 + 4t .. of rows g (a2) and
/// g + 8 (a3); B bytes k 4t .. (b0) and 16 + 4t .. (b1) of column g; d: (g, 2t), (g, 2t + 1), (g + 8, 2t),
/// (g + 8, 2t + 1). Not volatile (no side effects): the compiler may schedule the MMAs among the loads.
__device__ __forceinline__ void mma_s8(int (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                       uint32_t b1) {
  asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

}  // namespace tritium::cuda
