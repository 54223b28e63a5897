#include <immintrin.h>

#include <cstring>

#include "kernels/cpu/gemm_bf16.h"

namespace tritium::cpu::detail {

namespace {

// bf16 -> f32 is a 16-bit left shift of the bit pattern: exact.
inline __m256 widen8(const uint16_t* p) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

inline float widen1(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// The horizontal sum in gemm_f32's order: (0+4, 1+5, 2+6, 3+7) -> (0+2, 1+3) -> (0+1).
inline float hsum(__m256 v) {
  __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
  __m128 s4 = _mm_add_ps(lo, hi);
  __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  __m128 s1 = _mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1));
  return _mm_cvtss_f32(s1);
}

// One output: the 8-lane sum, then the scalar K tail in increasing k, then the bias (gemm_f32's finish).
inline float finish(__m256 acc, const float* xr, const uint16_t* wr, int64_t K8, int64_t K, const float* bias,
                    int64_t n) {
  float s = hsum(acc);
  for (int64_t k = K8; k < K; ++k) s = __builtin_fmaf(xr[k], widen1(wr[k]), s);
  return bias ? s + bias[n] : s;
}

}  // namespace

void widen_bf16_avx2(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, widen8(src + i));
  for (; i < n; ++i) dst[i] = widen1(src[i]);
}

void gemm_bf16w_avx2_rows(const float* x, const uint16_t* w, const float* bias, float* y, int64_t M, int64_t N,
                          int64_t K, int64_t n0, int64_t n1) {
  const int64_t K8 = K & ~int64_t{7};
  for (int64_t m = 0; m < M; ++m) {
    const float* xr = x + m * K;
    float* yr = y + m * N;
    int64_t n = n0;
    // Eight weight rows at a time: eight independent FMA chains hide the FMA latency while the bf16 rows stream.
    for (; n + 8 <= n1; n += 8) {
      const uint16_t* w0 = w + n * K;
      __m256 a[8];
      for (auto& v : a) v = _mm256_setzero_ps();
      for (int64_t k = 0; k < K8; k += 8) {
        const __m256 xv = _mm256_loadu_ps(xr + k);
        for (int r = 0; r < 8; ++r) a[r] = _mm256_fmadd_ps(xv, widen8(w0 + r * K + k), a[r]);
      }
      for (int r = 0; r < 8; ++r) yr[n + r] = finish(a[r], xr, w0 + r * K, K8, K, bias, n + r);
    }
    for (; n < n1; ++n) {
      const uint16_t* wr = w + n * K;
      __m256 a = _mm256_setzero_ps();
      for (int64_t k = 0; k < K8; k += 8) a = _mm256_fmadd_ps(_mm256_loadu_ps(xr + k), widen8(wr + k), a);
      yr[n] = finish(a, xr, wr, K8, K, bias, n);
    }
  }
}

}  // namespace tritium::cpu::detail
