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
/// the AVX-512 VNNI kernel on the avx512 / amx kernel paths (each decoded block serves up to 8 tokens), the AVX2
/// kernel on avx2 (up to 4 tokens), else a scalar loop.
void q4_gemm(const Q4Rows& w, const int8_t* x, const float* act_scale, int64_t M, float* y);
/// The scalar reference of q4_gemm (for tests).
void q4_gemm_ref(const Q4Rows& w, const int8_t* x, const float* act_scale, int64_t M, float* y);

namespace cpu {
/// AVX2 rows [n0, n1) of T = 1..4 tokens: y[t * ldy + n] = act_scale[t] * sum ... (see q4_gemm) for the tokens
/// x int8 [T, K]. xoff: int32 [T, ceil(K / 128) * 8], for each 4 groups g..g+3 of 32 columns: -4 * (sum of x
/// over group g + i) at i and 4 + i (0 past the row's last group): cpu::grouped_head_offsets(x, T, K, 8).
void q4_gemm_rows_avx2(const Q4Rows& w, const int8_t* x, const int32_t* xoff, const float* act_scale, int T,
                       int64_t n0, int64_t n1, float* y, int64_t ldy);
/// AVX-512 VNNI rows [n0, n1) of T = 1..8 tokens x int8 [T, K] into y[t * ldy + n]; xbias:
/// cpu::grouped_head_bias_sums(x, T, K, 8) (grouped_head.h).
void q4_gemm_rows_avx512(const Q4Rows& w, const int8_t* x, const float* xbias, const float* act_scale, int T,
                         int64_t n0, int64_t n1, float* y, int64_t ldy);
}  // namespace cpu

}  // namespace tritium
