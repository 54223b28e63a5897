// tritium kernels/cuda: element operations shared by the row kernels (ops.cu) and the persistent decode kernel
// (decode_persistent.cu), written with explicit rounding so both produce the CPU reference's bits.
#pragma once

#include <cuda_runtime.h>

namespace tritium::cuda {

/// GLU of one element: mode 1 relu(g)^2 * u, mode 2 silu(g) * u (as kernels/cpu glu).
__device__ __forceinline__ float glu_one(float g, float u, int mode) {
  if (mode == 1) {
    const float rr = g > 0.0f ? g : 0.0f;
    return __fmul_rn(__fmul_rn(rr, rr), u);
  }
  return __fmul_rn(__fdiv_rn(g, __fadd_rn(1.0f, expf(-g))), u);
}

/// Absmax int8 quantization of one value with multiplier s: round half to even, clamp to [-128, 127].
__device__ __forceinline__ int quant_one(float v, float s) {
  const float t = rintf(__fmul_rn(v, s));
  return static_cast<int>(fminf(fmaxf(t, -128.0f), 127.0f));
}

}  // namespace tritium::cuda
