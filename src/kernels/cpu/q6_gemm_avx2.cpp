// AVX2 kernel of the q6 head format (src/formats/q6_rows.h), for CPUs without AVX-512 VNNI. Per block of 64
// columns: the 32-byte low plane masked (columns 0..31) and shifted by 4 (columns 32..63); the 16-byte high plane
// broadcast to both 128-bit lanes and shifted per lane (left by 4 / 2 for columns 0..15 / 16..31, right by 0 / 2
// for 32..47 / 48..63) so each field sits in bits 4-5; masked and or-ed: u (0..63) of each group of 32 in column
// order. vpmaddubsw of u with the int8 activations cannot saturate (2 * 63 * 128 < 32767); vpmaddwd by 1 widens
// to int32 sums of 4 columns. Two blocks (4 groups) are folded by three vphaddd into [A B C D | A B C D] (each
// half a partial sum of its group), the -32 offset added as -16 * (the group's activation sum) per half, and
// scaled in float by the 4 scales converted at once.
#include <immintrin.h>

#include "kernels/cpu/q6_gemm.h"

namespace tritium::cpu {

namespace {

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

template <int T>
void rows(const Q6Rows& w, const int8_t* x, const int32_t* xoff, const float* act_scale, int64_t n0, int64_t n1,
          float* y, int64_t ldy) {
  const int64_t K = w.k, blocks = K / 64, G = K / kQ6Group, rb = w.row_bytes();
  const int64_t xoff_stride = (G + 3) / 4 * 8;
  const __m256i m0f = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30), ones = _mm256_set1_epi16(1);
  const __m256i shl_a = _mm256_set_epi32(2, 2, 2, 2, 4, 4, 4, 4), shr_b = _mm256_set_epi32(2, 2, 2, 2, 0, 0, 0, 0);
  for (int64_t r = n0; r < n1; ++r) {
    const uint8_t* cr = w.codes.data() + r * rb;
    const uint16_t* sr = w.scales.data() + r * G;
    __m256 facc[T];
    for (int t = 0; t < T; ++t) facc[t] = _mm256_setzero_ps();
    // Block b of every token: hadd of its two groups' int32 sums of 4 columns.
    auto block = [&](int64_t b, __m256i* out) {
      const uint8_t* p = cr + 48 * b;
      const __m256i L = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
      const __m256i H = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 32)));
      const __m256i ua = _mm256_or_si256(_mm256_and_si256(L, m0f), _mm256_and_si256(_mm256_sllv_epi32(H, shl_a), m30));
      const __m256i ub = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(L, 4), m0f),
                                         _mm256_and_si256(_mm256_srlv_epi32(H, shr_b), m30));
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
      for (int t = 0; t < T; ++t) h2[t] = _mm256_setzero_si256();
      finish(b, 2, h1, h2);
    }
    for (int t = 0; t < T; ++t) y[t * ldy + r] = act_scale[t] * hsum_ps(facc[t]);
  }
}

}  // namespace

void q6_gemm_rows_avx2(const Q6Rows& w, const int8_t* x, const int32_t* xoff, const float* act_scale, int T,
                       int64_t n0, int64_t n1, float* y, int64_t ldy) {
  switch (T) {
    case 1: rows<1>(w, x, xoff, act_scale, n0, n1, y, ldy); break;
    case 2: rows<2>(w, x, xoff, act_scale, n0, n1, y, ldy); break;
    case 3: rows<3>(w, x, xoff, act_scale, n0, n1, y, ldy); break;
    default: rows<4>(w, x, xoff, act_scale, n0, n1, y, ldy); break;
  }
}

}  // namespace tritium::cpu
