// tritium kernels/cpu: the AVX-512 VNNI loop shared by the grouped output-head formats (q4: formats/q4_rows.h, q6:
// formats/q6_rows.h). Included only by files compiled for AVX-512 (*_avx512.cpp).
//
// Both formats hold, per row, blocks of 64 columns = two groups of 32, each group with an fp16 scale, and unsigned
// codes u = q + bias (u < 64). A format supplies Decode(block pointer) -> zmm: the block's 64 codes as bytes in
// column order. Per token one vpdpbusd (u unsigned, x signed: exact, no saturation) leaves the int32 sums of u * x
// over 4 columns in 16 lanes (lanes 0-7: the block's first group, 8-15: its second), and one conversion and one
// FMA by the lanes' group scales add them to the token's float accumulator. The bias is taken off in float once
// per 8 groups: s[g] * (-bias * sum of x over g), from the token's precomputed group sums (xbias, exact in float),
// so nothing is loaded per block for it. A decoded block serves up to 8 tokens from registers; the codes are
// prefetched ahead (one core's loads stay in flight while it computes).
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace tritium::cpu::grouped_head_avx512 {

// Codes are streamed once; prefetches this far ahead (past the end they do not fault).
constexpr int64_t kPrefetchBytes = 2048;

/// Rows [n0, n1) of T tokens: y[t * ldy + n] = act_scale[t] * sum_g s[n, g] * (sum_{k in g} (u - bias) x[t, k]).
/// codes: the format's uint8 rows of row_bytes bytes (block_bytes per 64 columns); scales: fp16 [N, K / 32];
/// x int8 [T, K]; xbias float [T, Gp], Gp = ceil(K / 256) * 8: -bias * (sum of x[t] over group g) at g < K / 32,
/// 0 after.
template <int T, class Decode>
void rows(const uint8_t* codes, int64_t row_bytes, int64_t block_bytes, const uint16_t* scales, int64_t K,
          const int8_t* x, const float* xbias, const float* act_scale, int64_t n0, int64_t n1, float* y,
          int64_t ldy, Decode decode) {
  const int64_t blocks = K / 64, G = K / 32, Gp = (G + 7) / 8 * 8;
  // Lane i of block j of a quad of blocks takes the scale of group 2 j + i / 8.
  __m512i scale_idx[4];
  for (int j = 0; j < 4; ++j)
    scale_idx[j] = _mm512_set_epi32(2 * j + 1, 2 * j + 1, 2 * j + 1, 2 * j + 1, 2 * j + 1, 2 * j + 1, 2 * j + 1,
                                    2 * j + 1, 2 * j, 2 * j, 2 * j, 2 * j, 2 * j, 2 * j, 2 * j, 2 * j);
  for (int64_t r = n0; r < n1; ++r) {
    const uint8_t* cr = codes + r * row_bytes;
    const uint16_t* sr = scales + r * G;
    __m512 facc[T];
    __m256 bacc[T];
    #pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      facc[t] = _mm512_setzero_ps();
      bacc[t] = _mm256_setzero_ps();
    }
    for (int64_t q = 0; q < blocks; q += 4) {
      const int nb = blocks - q < 4 ? static_cast<int>(blocks - q) : 4;
      // The quad's (up to) 8 group scales as float, lanes past the row's end 0.
      const __m256 s8y =
          _mm256_cvtph_ps(_mm_maskz_loadu_epi16(static_cast<__mmask8>((1u << (2 * nb)) - 1), sr + 2 * q));
      const __m512 s8 = _mm512_castps256_ps512(s8y);  // only lanes 0-7 are read (scale_idx)
      #pragma GCC unroll 8
      for (int t = 0; t < T; ++t) bacc[t] = _mm256_fmadd_ps(s8y, _mm256_loadu_ps(xbias + t * Gp + 2 * q), bacc[t]);
      for (int j = 0; j < nb; ++j) {
        const int64_t b = q + j;
        const uint8_t* p = cr + block_bytes * b;
        _mm_prefetch(reinterpret_cast<const char*>(p + kPrefetchBytes), _MM_HINT_T0);
        const __m512i u = decode(p);
        const __m512 sv = _mm512_permutexvar_ps(scale_idx[j], s8);
        #pragma GCC unroll 8
        for (int t = 0; t < T; ++t) {
          const __m512i xb = _mm512_loadu_si512(x + t * K + 64 * b);
          const __m512i s = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u, xb);
          facc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), sv, facc[t]);
        }
      }
    }
    #pragma GCC unroll 8
    for (int t = 0; t < T; ++t)
      y[t * ldy + r] = act_scale[t] * _mm512_reduce_add_ps(_mm512_add_ps(facc[t], _mm512_zextps256_ps512(bacc[t])));
  }
}

/// rows<T> for T = 1..8 (larger T is taken as 8).
template <class Decode>
void rows_any(int T, const uint8_t* codes, int64_t row_bytes, int64_t block_bytes, const uint16_t* scales,
              int64_t K, const int8_t* x, const float* xbias, const float* act_scale, int64_t n0, int64_t n1,
              float* y, int64_t ldy, Decode decode) {
#define TRITIUM_GH_ROWS(n) \
  rows<n>(codes, row_bytes, block_bytes, scales, K, x, xbias, act_scale, n0, n1, y, ldy, decode)
  switch (T) {
    case 1: return TRITIUM_GH_ROWS(1);
    case 2: return TRITIUM_GH_ROWS(2);
    case 3: return TRITIUM_GH_ROWS(3);
    case 4: return TRITIUM_GH_ROWS(4);
    case 5: return TRITIUM_GH_ROWS(5);
    case 6: return TRITIUM_GH_ROWS(6);
    case 7: return TRITIUM_GH_ROWS(7);
    default: return TRITIUM_GH_ROWS(8);
  }
#undef TRITIUM_GH_ROWS
}

}  // namespace tritium::cpu::grouped_head_avx512
