// tritium kernels/cpu: the product of int8 activations with q4 weights (formats/q4_rows.h), the output head's
// 4-bit format:
//   y[m, n] = act_scale[m] * sum_g s[n, g] * (sum_{k in g} (u[n, k] - 8) * x[m, k]),
// the inner sums exact in int32, the float sum over groups in the kernel's lane order (results agree with the
// scalar reference to float rounding, not bit for bit).
#pragma once

#include <cstdint>

#include "formats/q4_rows.h"

namespace tritium {

/// y float32 [M, N] = product above, for x int8 [M, K] with act_scale float [M]. Multithreaded over rows;
/// AVX-512 VNNI when the kernel path allows it, else a scalar loop.
void q4_gemm(const Q4Rows& w, const int8_t* x, const float* act_scale, int64_t M, float* y);
/// The scalar reference of q4_gemm (for tests).
void q4_gemm_ref(const Q4Rows& w, const int8_t* x, const float* act_scale, int64_t M, float* y);

namespace cpu {
/// AVX-512 VNNI rows [n0, n1) of one token: y[n] = act_scale * sum ... (see q4_gemm). xneg8: int32 [K / 4],
/// -8 * (sum of x over each group of 4 columns).
void q4_gemv_rows_avx512(const Q4Rows& w, const int8_t* x, const int32_t* xneg8, float act_scale, int64_t n0,
                         int64_t n1, float* y);
}  // namespace cpu

}  // namespace tritium
