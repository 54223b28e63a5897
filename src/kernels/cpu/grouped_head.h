// tritium kernels/cpu: what the q4 and q6 head GEMMs (q4_gemm.h, q6_gemm.h) share: the scalar reference, and
// around their SIMD row kernels the activations' per-group offsets and the walk over tiles of rows and tokens.
#pragma once

#include <cstdint>
#include <functional>

#include "core/dtype.h"
#include "core/parallel.h"

namespace tritium::cpu {

/// The int32 count per token of grouped_head_offsets for K columns.
inline int64_t grouped_head_offset_stride(int64_t K) { return (K / 32 + 3) / 4 * 8; }

/// The codes' bias (u = q + bias) as activation sums, the xoff input of grouped_head::rows (grouped_head_avx2.h):
/// int32 [M, ceil(G / 4) * 8] for x int8 [M, K], G = K / 32 groups; for each 4 groups g..g+3, -(bias / 2) * (sum
/// of x over group g + i) at i and 4 + i, 0 past the last group. bias must be even. Written into off, which holds
/// M * grouped_head_offset_stride(K) values.
void grouped_head_offsets(const int8_t* x, int64_t M, int64_t K, int32_t bias, int32_t* off);

/// A format's SIMD rows (q4_gemm_rows_avx2, q6_gemm_rows_avx2 bound to their weights): rows [r0, r1) of T <= 4
/// tokens x int8 [T, K] with their offsets xoff, into y[t * ldy + n].
using GroupedHeadRows = std::function<void(const int8_t* x, const int32_t* xoff, const float* act_scale, int T,
                                           int64_t r0, int64_t r1, float* y, int64_t ldy)>;

/// The codes' bias as float group sums, the xbias input of grouped_head_avx512::rows (grouped_head_avx512.h):
/// float [M, Gp], Gp = ceil(K / 256) * 8, for x int8 [M, K]: -bias * (sum of x over group g) at g < K / 32 (exact:
/// |value| <= 64 * 128 * 32 < 2^24), 0 after. Written into out, which holds M * Gp floats.
void grouped_head_bias_sums(const int8_t* x, int64_t M, int64_t K, int32_t bias, float* out);
/// The float count per token of grouped_head_bias_sums for K columns.
inline int64_t grouped_head_bias_stride(int64_t K) { return (K / 32 + 7) / 8 * 8; }

/// A format's AVX-512 rows (q4_gemm_rows_avx512, q6_gemm_rows_avx512 bound to their weights): rows [r0, r1) of
/// T <= 8 tokens x int8 [T, K] with their bias sums xbias, into y[t * ldy + n].
using GroupedHeadRowsAvx512 = std::function<void(const int8_t* x, const float* xbias, const float* act_scale, int T,
                                                 int64_t r0, int64_t r1, float* y, int64_t ldy)>;

/// True when the kernel path (dispatch.h) runs the grouped heads' SIMD rows: AVX2 or above.
bool grouped_head_simd();

/// y float32 [M, N] through a format's SIMD rows, for a kernel path with grouped_head_simd(): on the avx512 / amx
/// paths avx512_rows with the bias sums of x int8 [M, K] and tiles of up to 8 tokens, else avx2_rows with the
/// offsets and tiles of up to 4. Every row of [0, N) meets every token once, rows in chunks of 128 (a q6 chunk is
/// 266 KB at K = 2560, so it stays in L2 while each tile of tokens passes over it), chunks spread over the threads
/// (core/parallel.h). The offsets / bias sums live in the calling thread's scratch (no allocation once grown).
void grouped_head_gemm(int64_t N, int64_t K, const int8_t* x, const float* act_scale, int64_t M, float* y,
                       int32_t bias, const GroupedHeadRows& avx2_rows, const GroupedHeadRowsAvx512& avx512_rows);

/// A grouped-head format's whole product y float32 [M, N] = x int8 [M, K] against w (w.n rows of w.k columns):
/// ref(w, x, act_scale, M, y) where the kernel path has no SIMD rows, else grouped_head_gemm over the format's rows
/// avx2(w, ...) and avx512(w, ...) (the signatures of GroupedHeadRows / GroupedHeadRowsAvx512 after the weights).
template <class W, class Ref, class Avx2, class Avx512>
void grouped_head_product(const W& w, const int8_t* x, const float* act_scale, int64_t M, float* y, int32_t bias,
                          Ref ref, Avx2 avx2, Avx512 avx512) {
  if (!grouped_head_simd()) {
    ref(w, x, act_scale, M, y);
    return;
  }
  grouped_head_gemm(
      w.n, w.k, x, act_scale, M, y, bias,
      [&](const int8_t* xt, const int32_t* xoff, const float* st, int T, int64_t r0, int64_t r1, float* yt,
          int64_t ldy) { avx2(w, xt, xoff, st, T, r0, r1, yt, ldy); },
      [&](const int8_t* xt, const float* xbias, const float* st, int T, int64_t r0, int64_t r1, float* yt,
          int64_t ldy) { avx512(w, xt, xbias, st, T, r0, r1, yt, ldy); });
}

/// The scalar reference of a grouped head product: y[m, n] = act_scale[m] * sum_g f16(scales[n, g]) * (sum_{k in g}
/// code(row n's codes, k) * x[m, k]), groups of 32, multithreaded over rows.
template <class Code>
void grouped_head_gemm_ref(const uint8_t* codes, int64_t row_bytes, const uint16_t* scales, int64_t N, int64_t K,
                           const int8_t* x, const float* act_scale, int64_t M, float* y, Code code) {
  const int64_t G = K / 32;
  parallel_for(N, 64, [&](int64_t n0, int64_t n1) {
    for (int64_t m = 0; m < M; ++m)
      for (int64_t r = n0; r < n1; ++r) {
        const uint8_t* cr = codes + r * row_bytes;
        float s = 0.0f;
        for (int64_t g = 0; g < G; ++g) {
          int32_t acc = 0;
          for (int64_t c = g * 32; c < (g + 1) * 32; ++c) acc += code(cr, c) * x[m * K + c];
          s += f16_to_f32(scales[r * G + g]) * static_cast<float>(acc);
        }
        y[m * N + r] = act_scale[m] * s;
      }
  });
}

}  // namespace tritium::cpu
