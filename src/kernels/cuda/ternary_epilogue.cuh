// tritium kernels/cuda: the dequantization epilogue shared by the ternary kernels (ternary.cu: tc2 and BITCOS;
// ternary_tcb.cu: tcb). Device code only.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/kernels.h"

namespace tritium::cuda {

/// TernaryEpilogue as kernel argument, or the integer mode of the tests (acc_out != nullptr).
struct Epi {
  float* y;
  int64_t ldy;
  int add;
  int e0, e1;
  float s0, s1, s2;
  int32_t* acc_out;  // integer mode (tests): acc_out[m * n + row]
};

inline Epi make_epi(const TernaryEpilogue& e) {
  return Epi{e.y, e.ldy, e.add ? 1 : 0, e.seg_end[0], e.seg_end[1], e.seg_scale[0], e.seg_scale[1], e.seg_scale[2],
             nullptr};
}
inline Epi make_epi_i32(int32_t* acc) { return Epi{nullptr, 0, 0, 0, 0, 1.f, 1.f, 1.f, acc}; }

/// The dequantized value of the exact sum v of `row`: (float(v) * inv_s) * scale of the row's segment. Explicit
/// rounding, no FMA contraction, so it equals the CPU's (acc * inv_s) * scale; a residual is added with __fadd_rn.
__device__ __forceinline__ float epilogue_value(const Epi& ep, int row, int32_t v, float inv_s) {
  const float sc = row < ep.e0 ? ep.s0 : (row < ep.e1 ? ep.s1 : ep.s2);
  return __fmul_rn(__fmul_rn(static_cast<float>(v), inv_s), sc);
}

/// Writes the exact sum v = sum_k w x of (token m, row) through the epilogue: epilogue_value, stored or added
/// (residual).
__device__ __forceinline__ void store_result(const Epi& ep, int n, int m, int row, int32_t v, float inv_s) {
  if (ep.acc_out) {
    ep.acc_out[static_cast<int64_t>(m) * n + row] = v;
    return;
  }
  const float val = epilogue_value(ep, row, v, inv_s);
  float* p = ep.y + static_cast<int64_t>(m) * ep.ldy + row;
  if (ep.add) *p = __fadd_rn(*p, val);
  else *p = val;
}

}  // namespace tritium::cuda
