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

namespace {

// Finishes one output: horizontal sum in the fixed order, then the scalar K tail, then the bias.
inline float finish(__m256 acc, const float* xr, const float* wr, int64_t K8, int64_t K, const float* bias, int64_t n) {
  float s = hsum(acc);
  for (int64_t k = K8; k < K; ++k) s = __builtin_fmaf(xr[k], wr[k], s);
  return bias ? s + bias[n] : s;
}

}  // namespace

void gemm_f32_avx2_rows(const float* x, const float* w, const float* bias, float* y, int64_t M, int64_t N,
                        int64_t K, int64_t n0, int64_t n1) {
  const int64_t K8 = K & ~int64_t{7};
  // Register tile: 2 activation rows x 4 weight rows, each output with its own 8-lane accumulator over K in
  // increasing k, so every output is reduced in exactly the order of gemm_f32_ref whatever M is.
  int64_t m = 0;
  for (; m + 2 <= M; m += 2) {
    const float* x0 = x + m * K;
    const float* x1 = x0 + K;
    int64_t n = n0;
    for (; n + 4 <= n1; n += 4) {
      const float* w0 = w + n * K;
      const float* w1 = w0 + K;
      const float* w2 = w1 + K;
      const float* w3 = w2 + K;
      __m256 a00 = _mm256_setzero_ps(), a01 = a00, a02 = a00, a03 = a00, a10 = a00, a11 = a00, a12 = a00, a13 = a00;
      for (int64_t k = 0; k < K8; k += 8) {
        const __m256 xv0 = _mm256_loadu_ps(x0 + k), xv1 = _mm256_loadu_ps(x1 + k);
        __m256 wv = _mm256_loadu_ps(w0 + k);
        a00 = _mm256_fmadd_ps(xv0, wv, a00);
        a10 = _mm256_fmadd_ps(xv1, wv, a10);
        wv = _mm256_loadu_ps(w1 + k);
        a01 = _mm256_fmadd_ps(xv0, wv, a01);
        a11 = _mm256_fmadd_ps(xv1, wv, a11);
        wv = _mm256_loadu_ps(w2 + k);
        a02 = _mm256_fmadd_ps(xv0, wv, a02);
        a12 = _mm256_fmadd_ps(xv1, wv, a12);
        wv = _mm256_loadu_ps(w3 + k);
        a03 = _mm256_fmadd_ps(xv0, wv, a03);
        a13 = _mm256_fmadd_ps(xv1, wv, a13);
      }
      float* y0 = y + m * N;
      float* y1 = y0 + N;
      y0[n] = finish(a00, x0, w0, K8, K, bias, n);
      y0[n + 1] = finish(a01, x0, w1, K8, K, bias, n + 1);
      y0[n + 2] = finish(a02, x0, w2, K8, K, bias, n + 2);
      y0[n + 3] = finish(a03, x0, w3, K8, K, bias, n + 3);
      y1[n] = finish(a10, x1, w0, K8, K, bias, n);
      y1[n + 1] = finish(a11, x1, w1, K8, K, bias, n + 1);
      y1[n + 2] = finish(a12, x1, w2, K8, K, bias, n + 2);
      y1[n + 3] = finish(a13, x1, w3, K8, K, bias, n + 3);
    }
    for (; n < n1; ++n) {
      const float* wr = w + n * K;
      __m256 a0 = _mm256_setzero_ps(), a1 = a0;
      for (int64_t k = 0; k < K8; k += 8) {
        const __m256 wv = _mm256_loadu_ps(wr + k);
        a0 = _mm256_fmadd_ps(_mm256_loadu_ps(x0 + k), wv, a0);
        a1 = _mm256_fmadd_ps(_mm256_loadu_ps(x1 + k), wv, a1);
      }
      y[m * N + n] = finish(a0, x0, wr, K8, K, bias, n);
      y[(m + 1) * N + n] = finish(a1, x1, wr, K8, K, bias, n);
    }
  }
  for (; m < M; ++m) {
    const float* xr = x + m * K;
    int64_t n = n0;
    for (; n + 4 <= n1; n += 4) {
      const float* w0 = w + n * K;
      __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
      for (int64_t k = 0; k < K8; k += 8) {
        const __m256 xv = _mm256_loadu_ps(xr + k);
        a0 = _mm256_fmadd_ps(xv, _mm256_loadu_ps(w0 + k), a0);
        a1 = _mm256_fmadd_ps(xv, _mm256_loadu_ps(w0 + K + k), a1);
        a2 = _mm256_fmadd_ps(xv, _mm256_loadu_ps(w0 + 2 * K + k), a2);
        a3 = _mm256_fmadd_ps(xv, _mm256_loadu_ps(w0 + 3 * K + k), a3);
      }
      y[m * N + n] = finish(a0, xr, w0, K8, K, bias, n);
      y[m * N + n + 1] = finish(a1, xr, w0 + K, K8, K, bias, n + 1);
      y[m * N + n + 2] = finish(a2, xr, w0 + 2 * K, K8, K, bias, n + 2);
      y[m * N + n + 3] = finish(a3, xr, w0 + 3 * K, K8, K, bias, n + 3);
    }
    for (; n < n1; ++n) {
      const float* wr = w + n * K;
      __m256 a = _mm256_setzero_ps();
      for (int64_t k = 0; k < K8; k += 8) a = _mm256_fmadd_ps(_mm256_loadu_ps(xr + k), _mm256_loadu_ps(wr + k), a);
      y[m * N + n] = finish(a, xr, wr, K8, K, bias, n);
    }
  }
}

}  // namespace tritium::cpu::detail
