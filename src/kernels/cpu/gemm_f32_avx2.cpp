#include <immintrin.h>

#include "kernels/cpu/gemm_f32.h"

namespace tritium::cpu::detail {

static inline float hsum(__m256 v) {
  // (0+4, 1+5, 2+6, 3+7) -> (0+2, 1+3) -> (0+1): the order gemm_f32_ref reproduces.
  __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
  __m128 s4 = _mm_add_ps(lo, hi);
  __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  __m128 s1 = _mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1));
  return _mm_cvtss_f32(s1);
}

void gemm_f32_avx2_rows(const float* x, const float* w, const float* bias, float* y, int64_t M, int64_t N,
                        int64_t K, int64_t n0, int64_t n1) {
  const int64_t K8 = K & ~int64_t{7};
  // 4 weight rows at a time share each activation load; every output keeps its own accumulator.
  for (int64_t m = 0; m < M; ++m) {
    const float* xr = x + m * K;
    int64_t n = n0;
    for (; n + 4 <= n1; n += 4) {
      const float* w0 = w + n * K;
      __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
      for (int64_t k = 0; k < K8; k += 8) {
        __m256 xv = _mm256_loadu_ps(xr + k);
        a0 = _mm256_fmadd_ps(xv, _mm256_loadu_ps(w0 + k), a0);
        a1 = _mm256_fmadd_ps(xv, _mm256_loadu_ps(w0 + K + k), a1);
        a2 = _mm256_fmadd_ps(xv, _mm256_loadu_ps(w0 + 2 * K + k), a2);
        a3 = _mm256_fmadd_ps(xv, _mm256_loadu_ps(w0 + 3 * K + k), a3);
      }
      float s[4] = {hsum(a0), hsum(a1), hsum(a2), hsum(a3)};
      for (int j = 0; j < 4; ++j) {
        const float* wr = w0 + j * K;
        for (int64_t k = K8; k < K; ++k) s[j] = __builtin_fmaf(xr[k], wr[k], s[j]);
        y[m * N + n + j] = bias ? s[j] + bias[n + j] : s[j];
      }
    }
    for (; n < n1; ++n) {
      const float* wr = w + n * K;
      __m256 a = _mm256_setzero_ps();
      for (int64_t k = 0; k < K8; k += 8) a = _mm256_fmadd_ps(_mm256_loadu_ps(xr + k), _mm256_loadu_ps(wr + k), a);
      float s = hsum(a);
      for (int64_t k = K8; k < K; ++k) s = __builtin_fmaf(xr[k], wr[k], s);
      y[m * N + n] = bias ? s + bias[n] : s;
    }
  }
}

}  // namespace tritium::cpu::detail
