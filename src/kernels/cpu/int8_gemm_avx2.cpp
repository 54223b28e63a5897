// AVX2 int8 kernels. Signed x signed bytes: vpmaddubsw wants unsigned x signed, so each product
// x*w is computed as |x| * (sign(x) * w) (vpabsb + vpsignb). With |x|, |w| <= 127 a pair sum is at
// most 2 * 127 * 127 = 32258 < 32767: vpmaddubsw never saturates; vpmaddwd by 1 widens to int32.
#include <immintrin.h>

#include "kernels/cpu/int8_gemm.h"

namespace tritium::int8_detail {
namespace {

inline int32_t hsum_epi32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtsi128_si32(s);
}

inline float hsum_ps(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline __m256i dot32(__m256i ax, __m256i x, __m256i w, __m256i ones) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(ax, _mm256_sign_epi8(w, x)), ones);
}

}  // namespace

void gemm_avx2(const int8_t* x, const int8_t* w, int64_t M, int64_t N, int64_t K, int32_t* acc,
               int64_t n0, int64_t n1) {
  const __m256i ones = _mm256_set1_epi16(1);
  const int64_t K32 = K & ~int64_t{31};
  int64_t n = n0;
  for (; n + 4 <= n1; n += 4) {
    const int8_t* w0 = w + n * K;
    const int8_t* w1 = w0 + K;
    const int8_t* w2 = w1 + K;
    const int8_t* w3 = w2 + K;
    for (int64_t m = 0; m < M; ++m) {
      const int8_t* xr = x + m * K;
      __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
      for (int64_t k = 0; k < K32; k += 32) {
        // The next tile's rows into L2, 128 bytes per 128 consumed (as the AVX-512 kernel: int8_gemm_avx512.cpp).
        _mm_prefetch(reinterpret_cast<const char*>(w0 + 4 * K + 4 * k), _MM_HINT_T1);
        _mm_prefetch(reinterpret_cast<const char*>(w0 + 4 * K + 4 * k + 64), _MM_HINT_T1);
        const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xr + k));
        const __m256i ax = _mm256_abs_epi8(xv);
        a0 = _mm256_add_epi32(a0, dot32(ax, xv, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w0 + k)), ones));
        a1 = _mm256_add_epi32(a1, dot32(ax, xv, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w1 + k)), ones));
        a2 = _mm256_add_epi32(a2, dot32(ax, xv, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w2 + k)), ones));
        a3 = _mm256_add_epi32(a3, dot32(ax, xv, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w3 + k)), ones));
      }
      int32_t s0 = hsum_epi32(a0), s1 = hsum_epi32(a1), s2 = hsum_epi32(a2), s3 = hsum_epi32(a3);
      for (int64_t k = K32; k < K; ++k) {
        const int32_t xv = xr[k];
        s0 += xv * w0[k];
        s1 += xv * w1[k];
        s2 += xv * w2[k];
        s3 += xv * w3[k];
      }
      int32_t* out = acc + m * N + n;
      out[0] = s0;
      out[1] = s1;
      out[2] = s2;
      out[3] = s3;
    }
  }
  for (; n < n1; ++n) {
    const int8_t* wr = w + n * K;
    for (int64_t m = 0; m < M; ++m) {
      const int8_t* xr = x + m * K;
      __m256i a = _mm256_setzero_si256();
      for (int64_t k = 0; k < K32; k += 32) {
        const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xr + k));
        a = _mm256_add_epi32(a, dot32(_mm256_abs_epi8(xv), xv,
                                      _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wr + k)), ones));
      }
      int32_t s = hsum_epi32(a);
      for (int64_t k = K32; k < K; ++k) s += static_cast<int32_t>(xr[k]) * wr[k];
      acc[m * N + n] = s;
    }
  }
}

namespace {
inline __m256 load8_s8_as_f32(const int8_t* p) {
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}
}  // namespace

void gemm_f32s8_avx2(const float* x, const int8_t* w, const float* w_scale, int64_t M, int64_t N,
                     int64_t K, float* y, int64_t n0, int64_t n1) {
  const int64_t K8 = K & ~int64_t{7};
  for (int64_t n = n0; n < n1; ++n) {
    const int8_t* wr = w + n * K;
    for (int64_t m = 0; m < M; ++m) {
      const float* xr = x + m * K;
      __m256 a = _mm256_setzero_ps();
      for (int64_t k = 0; k < K8; k += 8) a = _mm256_fmadd_ps(_mm256_loadu_ps(xr + k), load8_s8_as_f32(wr + k), a);
      float s = hsum_ps(a);
      for (int64_t k = K8; k < K; ++k) s += xr[k] * static_cast<float>(wr[k]);
      y[m * N + n] = s * w_scale[n];
    }
  }
}

}  // namespace tritium::int8_detail
