// tritium kernels/cpu: the AVX2 loop shared by the grouped output-head formats (q4: formats/q4_rows.h, q6:
// formats/q6_rows.h). Included only by files compiled for AVX2 (*_avx2.cpp).
//
// Both formats hold, per row, blocks of 64 columns = two groups of 32, each group with an fp16 scale, and unsigned
// codes u = q + bias (u < 64). A format supplies Decode(row, b, ua, ub): the 32 codes of the block's first and
// second group as bytes in column order. Per token: vpmaddubsw of u with the int8 activations cannot saturate
// (2 * 63 * 128 < 32767); vpmaddwd by 1 widens to int32 sums of 4 columns. Two blocks (4 groups) are folded by
// three vphaddd into [A B C D | A B C D] (each half a partial sum of its group); the bias is added as
// -(bias / 2) * (the group's activation sum) per half (xoff), and the 4 sums are scaled in float by the 4 scales
// converted at once. Each decoded block serves T = 1..4 tokens; the loops over tokens are unrolled so the
// accumulators stay in registers (GCC keeps them in memory otherwise for some decoders, 2.5x slower at T = 4).
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace tritium::cpu::grouped_head {

inline float hsum_ps(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// The 4 fp16 scales of groups g..g+3 (n < 4 of them at a row's end, the rest 0) as [A B C D | A B C D].
inline __m256 scales4(const uint16_t* s, int n) {
  uint64_t bits = 0;
  __builtin_memcpy(&bits, s, static_cast<size_t>(n) * 2);
  return _mm256_cvtph_ps(_mm_set1_epi64x(static_cast<long long>(bits)));
}

// The codes are streamed once; a software prefetch this far ahead keeps one core's loads in flight while it
// computes (the hardware prefetcher alone leaves it waiting). Prefetches past the end do not fault.
constexpr int64_t kPrefetchBytes = 2048;

/// Rows [n0, n1) of T tokens: y[t * ldy + n] = act_scale[t] * sum_g s[n, g] * (sum_{k in g} (u - bias) x[t, k]).
/// codes: the format's uint8 rows of row_bytes bytes; scales: fp16 [N, K / 32]; x int8 [T, K]; xoff int32
/// [T, ceil(K / 128) * 8] as described above (0 past the row's last group).
template <int T, class Decode>
void rows(const uint8_t* codes, int64_t row_bytes, const uint16_t* scales, int64_t K, const int8_t* x,
          const int32_t* xoff, const float* act_scale, int64_t n0, int64_t n1, float* y, int64_t ldy,
          Decode decode) {
  const int64_t blocks = K / 64, G = K / 32, xoff_stride = (G + 3) / 4 * 8, block_bytes = row_bytes / blocks;
  const __m256i ones = _mm256_set1_epi16(1);
  for (int64_t r = n0; r < n1; ++r) {
    const uint8_t* cr = codes + r * row_bytes;
    const uint16_t* sr = scales + r * G;
    __m256 facc[T];
    #pragma GCC unroll 4
    for (int t = 0; t < T; ++t) facc[t] = _mm256_setzero_ps();
    // Block b of every token: hadd of its two groups' int32 sums of 4 columns.
    auto block = [&](int64_t b, __m256i* out) {
      _mm_prefetch(reinterpret_cast<const char*>(cr + b * block_bytes + kPrefetchBytes), _MM_HINT_T0);
      __m256i ua, ub;
      decode(cr, b, ua, ub);
      #pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        const int8_t* xb = x + t * K + 64 * b;
        const __m256i xa = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb));
        const __m256i xbv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb + 32));
        const __m256i da = _mm256_madd_epi16(_mm256_maddubs_epi16(ua, xa), ones);
        const __m256i db = _mm256_madd_epi16(_mm256_maddubs_epi16(ub, xbv), ones);
        out[t] = _mm256_hadd_epi32(da, db);
      }
    };
    auto finish = [&](int64_t b, int ngroups, const __m256i* h1, const __m256i* h2) {
      const __m256 sv = scales4(sr + 2 * b, ngroups);
      #pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        const __m256i off = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xoff + t * xoff_stride + 4 * b));
        const __m256i h = _mm256_add_epi32(_mm256_hadd_epi32(h1[t], h2[t]), off);
        facc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(h), sv, facc[t]);
      }
    };
    __m256i h1[T], h2[T];
    int64_t b = 0;
    for (; b + 2 <= blocks; b += 2) {
      block(b, h1);
      block(b + 1, h2);
      finish(b, 4, h1, h2);
    }
    if (b < blocks) {
      block(b, h1);
      #pragma GCC unroll 4
      for (int t = 0; t < T; ++t) h2[t] = _mm256_setzero_si256();
      finish(b, 2, h1, h2);
    }
    #pragma GCC unroll 4
    for (int t = 0; t < T; ++t) y[t * ldy + r] = act_scale[t] * hsum_ps(facc[t]);
  }
}

/// rows<T> for T = 1..4 (larger T is taken as 4).
template <class Decode>
void rows_any(int T, const uint8_t* codes, int64_t row_bytes, const uint16_t* scales, int64_t K, const int8_t* x,
              const int32_t* xoff, const float* act_scale, int64_t n0, int64_t n1, float* y, int64_t ldy,
              Decode decode) {
  switch (T) {
    case 1: rows<1>(codes, row_bytes, scales, K, x, xoff, act_scale, n0, n1, y, ldy, decode); break;
    case 2: rows<2>(codes, row_bytes, scales, K, x, xoff, act_scale, n0, n1, y, ldy, decode); break;
    case 3: rows<3>(codes, row_bytes, scales, K, x, xoff, act_scale, n0, n1, y, ldy, decode); break;
    default: rows<4>(codes, row_bytes, scales, K, x, xoff, act_scale, n0, n1, y, ldy, decode); break;
  }
}

}  // namespace tritium::cpu::grouped_head
