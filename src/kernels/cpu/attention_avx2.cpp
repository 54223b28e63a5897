#include <immintrin.h>

#include <cmath>

#include "kernels/cpu/attention.h"

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

namespace {

// J query rows over the same n positions of one KV head, each with exactly attention_row_avx2's operations in
// its order (so every row's result is bit for bit that kernel's): the rows' dependency chains are interleaved,
// which the one-row kernel cannot do (each of its FMAs waits for the previous), and every K and V vector loaded
// serves J rows.
template <int J>
void rows(const float* const* q, float* const* out, float* scores, int64_t ld, const float* k, const float* v,
          int64_t n, int64_t kv_stride, int D, float scale) {
  float mx[J];
  for (int j = 0; j < J; ++j) mx[j] = -INFINITY;
  for (int64_t p = 0; p < n; ++p) {
    const float* kp = k + p * kv_stride;
    __m256 acc[J];
    for (int j = 0; j < J; ++j) acc[j] = _mm256_setzero_ps();
    for (int d = 0; d < D; d += 8) {
      const __m256 kd = _mm256_loadu_ps(kp + d);
      for (int j = 0; j < J; ++j) acc[j] = _mm256_fmadd_ps(_mm256_loadu_ps(q[j] + d), kd, acc[j]);
    }
    for (int j = 0; j < J; ++j) {
      __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(acc[j]), _mm256_extractf128_ps(acc[j], 1));
      s4 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
      s4 = _mm_add_ss(s4, _mm_shuffle_ps(s4, s4, 1));
      const float s = _mm_cvtss_f32(s4) * scale;
      scores[j * ld + p] = s;
      mx[j] = s > mx[j] ? s : mx[j];
    }
  }
  float inv[J];
  for (int j = 0; j < J; ++j) {
    float* sc = scores + j * ld;
    double sum = 0.0;
    for (int64_t p = 0; p < n; ++p) {
      sc[p] = std::exp(sc[p] - mx[j]);
      sum += sc[p];
    }
    inv[j] = static_cast<float>(1.0 / sum);
  }
  for (int d = 0; d < D; d += 8) {
    __m256 acc[J];
    for (int j = 0; j < J; ++j) acc[j] = _mm256_setzero_ps();
    for (int64_t p = 0; p < n; ++p) {
      const __m256 vd = _mm256_loadu_ps(v + p * kv_stride + d);
      for (int j = 0; j < J; ++j) acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(scores[j * ld + p]), vd, acc[j]);
    }
    for (int j = 0; j < J; ++j) _mm256_storeu_ps(out[j] + d, _mm256_mul_ps(acc[j], _mm256_set1_ps(inv[j])));
  }
}

}  // namespace

void attention_rows_avx2(int J, const float* const* q, float* const* out, float* scores, int64_t ld, const float* k,
                         const float* v, int64_t n, int64_t kv_stride, int D, float scale) {
  switch (J) {
    case 1: return rows<1>(q, out, scores, ld, k, v, n, kv_stride, D, scale);
    case 2: return rows<2>(q, out, scores, ld, k, v, n, kv_stride, D, scale);
    case 3: return rows<3>(q, out, scores, ld, k, v, n, kv_stride, D, scale);
    case 4: return rows<4>(q, out, scores, ld, k, v, n, kv_stride, D, scale);
    case 5: return rows<5>(q, out, scores, ld, k, v, n, kv_stride, D, scale);
    case 6: return rows<6>(q, out, scores, ld, k, v, n, kv_stride, D, scale);
    case 7: return rows<7>(q, out, scores, ld, k, v, n, kv_stride, D, scale);
    default: return rows<8>(q, out, scores, ld, k, v, n, kv_stride, D, scale);
  }
}

}  // namespace tritium::cpu::detail
