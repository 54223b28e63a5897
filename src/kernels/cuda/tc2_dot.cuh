// tritium kernels/cuda: the dp4a inner step on tc2 codes (layout: ternary_tc2.h) of the persistent decode kernel.
// ternary.cu's GEMV does the same steps in its own loop (masks hoisted over the tokens): routing it through these
// helpers measured 1.1-1.5x slower on the H200 (2560x6912 at one token 3.79 -> 5.69 us), so it keeps it. A tc2 word holds 16 codes c = w + 1 in four 2-bit groups; group g, masked in
// place (word & (0x03030303 << 2g)), is four bytes c * 4^g (no shift needed), multiplied with 4 int8 activations
// by dp4a.u32.s32 into its own accumulator; acc[0] + acc[1] / 4 + acc[2] / 16 + acc[3] / 64 (exact shifts: each
// acc[g] is a multiple of 4^g) is then sum_k c_k x_k.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace tritium::cuda {

inline constexpr uint32_t kTc2Mask = 0x03030303u;

/// dp4a with unsigned 8-bit codes in a and signed int8 activations in b (the masked groups reach 128).
__device__ __forceinline__ int dp4a_us(uint32_t a, int b, int c) {
  int d;
  asm("dp4a.u32.s32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}

/// acc[g] += masked group g of `word` . the 4 activations of xv component g (16 values: word q of a chunk).
__device__ __forceinline__ void tc2_dot_word(uint32_t word, const uint4& xv, int (&acc)[4]) {
  acc[0] = dp4a_us(word & kTc2Mask, static_cast<int>(xv.x), acc[0]);
  acc[1] = dp4a_us(word & (kTc2Mask << 2), static_cast<int>(xv.y), acc[1]);
  acc[2] = dp4a_us(word & (kTc2Mask << 4), static_cast<int>(xv.z), acc[2]);
  acc[3] = dp4a_us(word & (kTc2Mask << 6), static_cast<int>(xv.w), acc[3]);
}

/// The dot product from the four group accumulators.
__device__ __forceinline__ int tc2_combine(const int (&acc)[4]) {
  return acc[0] + (acc[1] >> 2) + (acc[2] >> 4) + (acc[3] >> 6);
}

}  // namespace tritium::cuda
