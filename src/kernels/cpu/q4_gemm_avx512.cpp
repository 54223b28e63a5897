// AVX-512 VNNI kernel of the q4 head format (src/formats/q4_rows.h): per 64 columns, one 32-byte load split
// into low / high nibbles (columns 0..31 / 32..63 of the block), vpdpbusd with the int8 activations on top of
// -8 * (the activations' 4-column sums), so each int32 lane holds sum (u - 8) * x over 4 columns; lanes 0-7
// belong to the block's first group of 32, lanes 8-15 to the second, and are scaled by their group's scale in
// float before accumulating.
// GCC 12 reports a false -Wmaybe-uninitialized inside its own avx512fintrin.h helpers (the unmasked intrinsics
// pass an undefined pass-through vector).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include "kernels/cpu/q4_gemm.h"

namespace tritium::cpu {

void q4_gemv_rows_avx512(const Q4Rows& w, const int8_t* x, const int32_t* xneg8, float act_scale, int64_t n0,
                         int64_t n1, float* y) {
  const int64_t K = w.k, blocks = K / 64, G = K / kQ4Group;
  const __m256i lo_mask = _mm256_set1_epi8(0x0F);
  const __m512i pair_idx = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
  for (int64_t r = n0; r < n1; ++r) {
    const uint8_t* cr = w.codes.data() + r * K / 2;
    const uint16_t* sr = w.scales.data() + r * G;
    __m512 facc0 = _mm512_setzero_ps(), facc1 = _mm512_setzero_ps();
    int64_t b = 0;
    auto block = [&](int64_t bb) {
      const __m256i packed = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(cr + bb * 32));
      const __m256i lo = _mm256_and_si256(packed, lo_mask);
      const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(packed, 4), lo_mask);
      const __m512i u = _mm512_inserti64x4(_mm512_zextsi256_si512(lo), hi, 1);
      const __m512i xv = _mm512_loadu_si512(x + bb * 64);
      const __m512i init = _mm512_loadu_si512(xneg8 + bb * 16);
      const __m512i acc = _mm512_dpbusd_epi32(init, u, xv);
      uint32_t s2;
      __builtin_memcpy(&s2, sr + 2 * bb, 4);
      const __m128 sc = _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(s2)));
      const __m512 sv = _mm512_permutexvar_ps(pair_idx, _mm512_zextps128_ps512(sc));
      return _mm512_mul_ps(_mm512_cvtepi32_ps(acc), sv);
    };
    for (; b + 2 <= blocks; b += 2) {
      facc0 = _mm512_add_ps(facc0, block(b));
      facc1 = _mm512_add_ps(facc1, block(b + 1));
    }
    if (b < blocks) facc0 = _mm512_add_ps(facc0, block(b));
    y[r - n0] = act_scale * _mm512_reduce_add_ps(_mm512_add_ps(facc0, facc1));
  }
}

}  // namespace tritium::cpu
