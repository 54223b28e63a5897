// AVX-512 VNNI kernel of the q6 head format (src/formats/q6_rows.h). Per block of 64 columns: the 32-byte low
// plane broadcast to both halves of a register, the upper half shifted right by 4 (low nibbles of columns 0..31,
// then of 32..63); the 16-byte high plane broadcast to the four 128-bit lanes, lane i rotated so the field of
// columns 16 i..16 i + 15 sits in bits 4-5; one bit select and one mask give u (0..63) in column order. vpdpbusd
// of u with the int8 activations on top of -32 * (the activations' 4-column sums) leaves in each int32 lane
// sum (u - 32) * x over 4 columns; lanes 0-7 belong to the block's first group of 32, lanes 8-15 to the second,
// and are scaled by their group's scale in float (8 scales of 4 blocks converted at once). A decoded block serves
// up to 4 tokens.
// GCC 12 reports a false -Wmaybe-uninitialized inside its own avx512fintrin.h helpers (the unmasked intrinsics
// pass an undefined pass-through vector).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include "kernels/cpu/q6_gemm.h"

namespace tritium::cpu {

namespace {

template <int T>
void rows(const Q6Rows& w, const int8_t* x, const int32_t* xneg32, const float* act_scale, int64_t n0, int64_t n1,
          float* y, int64_t ldy) {
  const int64_t K = w.k, blocks = K / 64, G = K / kQ6Group, rb = w.row_bytes();
  const __m512i nib = _mm512_set1_epi8(0x0F);
  const __m512i six = _mm512_set1_epi8(0x3F);
  // Rotation of each 128-bit lane of the broadcast high plane: bits 0-1 / 2-3 / 4-5 / 6-7 to bits 4-5.
  const __m512i hi_rot = _mm512_set_epi32(30, 30, 30, 30, 0, 0, 0, 0, 2, 2, 2, 2, 4, 4, 4, 4);
  // Scale index of block i of 4: lanes 0-7 the group 2 i, lanes 8-15 the group 2 i + 1.
  const __m512i sidx[4] = {
      _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0),
      _mm512_set_epi32(3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2, 2, 2),
      _mm512_set_epi32(5, 5, 5, 5, 5, 5, 5, 5, 4, 4, 4, 4, 4, 4, 4, 4),
      _mm512_set_epi32(7, 7, 7, 7, 7, 7, 7, 7, 6, 6, 6, 6, 6, 6, 6, 6)};
  for (int64_t r = n0; r < n1; ++r) {
    const uint8_t* cr = w.codes.data() + r * rb;
    const uint16_t* sr = w.scales.data() + r * G;
    __m512 facc[2][T];
    for (int t = 0; t < T; ++t) facc[0][t] = facc[1][t] = _mm512_setzero_ps();
    auto block = [&](int64_t b, __m512 sv, __m512* acc) {
      const uint8_t* p = cr + 48 * b;
      const __m512i lb = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
      const __m512i lo = _mm512_mask_srli_epi16(lb, 0xFFFF0000u, lb, 4);
      const __m512i hb = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 32)));
      const __m512i hi = _mm512_rolv_epi32(hb, hi_rot);
      const __m512i u = _mm512_and_si512(_mm512_ternarylogic_epi32(lo, hi, nib, 0xE4), six);  // nib ? lo : hi
      for (int t = 0; t < T; ++t) {
        const __m512i xv = _mm512_loadu_si512(x + t * K + b * 64);
        const __m512i init = _mm512_loadu_si512(xneg32 + t * K / 4 + b * 16);
        const __m512i d = _mm512_dpbusd_epi32(init, u, xv);
        acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d), sv, acc[t]);
      }
    };
    int64_t b = 0;
    for (; b + 4 <= blocks; b += 4) {
      const __m256 s8 = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sr + 2 * b)));
      const __m512 s16 = _mm512_castps256_ps512(s8);
      for (int i = 0; i < 4; ++i) block(b + i, _mm512_permutexvar_ps(sidx[i], s16), facc[i & 1]);
    }
    for (; b < blocks; ++b) {
      uint32_t s2;
      __builtin_memcpy(&s2, sr + 2 * b, 4);
      const __m128 sc = _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(s2)));
      block(b, _mm512_permutexvar_ps(sidx[0], _mm512_castps128_ps512(sc)), facc[b & 1]);
    }
    for (int t = 0; t < T; ++t)
      y[t * ldy + r] = act_scale[t] * _mm512_reduce_add_ps(_mm512_add_ps(facc[0][t], facc[1][t]));
  }
}

}  // namespace

void q6_gemm_rows_avx512(const Q6Rows& w, const int8_t* x, const int32_t* xneg32, const float* act_scale, int T,
                         int64_t n0, int64_t n1, float* y, int64_t ldy) {
  switch (T) {
    case 1: rows<1>(w, x, xneg32, act_scale, n0, n1, y, ldy); break;
    case 2: rows<2>(w, x, xneg32, act_scale, n0, n1, y, ldy); break;
    case 3: rows<3>(w, x, xneg32, act_scale, n0, n1, y, ldy); break;
    default: rows<4>(w, x, xneg32, act_scale, n0, n1, y, ldy); break;
  }
}

}  // namespace tritium::cpu
