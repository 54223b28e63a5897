#include <immintrin.h>

#include <cmath>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/attention_rows.h"

namespace tritium::cpu::detail {

void attention_row_avx2(const float* q, const float* k, const float* v, float* out, float* scores, int64_t n,
                        int64_t kv_stride, int D, float scale) {
  // D is a multiple of 8 (checked by the caller).
  float mx = -INFINITY;
  for (int64_t p = 0; p < n; ++p) {
    const float* kp = k + p * kv_stride;
    __m256 acc = _mm256_setzero_ps();
    for (int d = 0; d < D; d += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(q + d), _mm256_loadu_ps(kp + d), acc);
    __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
    s4 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    s4 = _mm_add_ss(s4, _mm_shuffle_ps(s4, s4, 1));
    const float s = _mm_cvtss_f32(s4) * scale;
    scores[p] = s;
    mx = s > mx ? s : mx;
  }
  double sum = 0.0;
  for (int64_t p = 0; p < n; ++p) {
    scores[p] = std::exp(scores[p] - mx);
    sum += scores[p];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int d = 0; d < D; d += 8) {
    __m256 acc = _mm256_setzero_ps();
    for (int64_t p = 0; p < n; ++p)
      acc = _mm256_fmadd_ps(_mm256_set1_ps(scores[p]), _mm256_loadu_ps(v + p * kv_stride + d), acc);
    _mm256_storeu_ps(out + d, _mm256_mul_ps(acc, _mm256_set1_ps(inv)));
  }
}

void attention_rows_avx2(int J, const float* const* q, float* const* out, float* scores, int64_t ld, const float* k,
                         const float* v, int64_t n, int64_t kv_stride, int D, float scale) {
  attention_rows_impl::rows_any<16>(J, q, out, scores, ld, k, v, n, kv_stride, D, scale);
}

}  // namespace tritium::cpu::detail
