// AVX2 per-token absmax int8 quantization (see quantize_rows_absmax_i8 in ops.h): the same float products as the
// scalar loop, rounded half to even by vcvtps2dq (default MXCSR rounding, as nearbyint) and clamped to int8 by the
// signed saturation of two packs, so the codes are bit-identical to the scalar loop's.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace tritium::cpu {

void quantize_row_absmax_i8_avx2(const float* xr, int64_t K, int8_t* qr, float* inv_scale) {
  const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  __m256 vmax = _mm256_setzero_ps();
  int64_t k = 0;
  for (; k + 8 <= K; k += 8) vmax = _mm256_max_ps(vmax, _mm256_and_ps(_mm256_loadu_ps(xr + k), absmask));
  __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(vmax), _mm256_extractf128_ps(vmax, 1));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  m4 = _mm_max_ss(m4, _mm_shuffle_ps(m4, m4, 1));
  float amax = _mm_cvtss_f32(m4);
  for (; k < K; ++k) amax = std::max(amax, std::fabs(xr[k]));
  const float s = 127.0f / std::max(amax, 1e-5f);
  const __m256 vs = _mm256_set1_ps(s);
  // vpackssdw / vpacksswb work within 128-bit lanes: after both packs the 32 bytes are the four 8-value groups in
  // the order 0, 2, 1, 3 (a, b, c, d = k 0-7, 8-15, 16-23, 24-31), which one dword permutation restores.
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  k = 0;
  for (; k + 32 <= K; k += 32) {
    const __m256i a = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(xr + k), vs));
    const __m256i b = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(xr + k + 8), vs));
    const __m256i c = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(xr + k + 16), vs));
    const __m256i d = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(xr + k + 24), vs));
    const __m256i ab = _mm256_packs_epi32(a, b), cd = _mm256_packs_epi32(c, d);
    const __m256i bytes = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(ab, cd), order);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(qr + k), bytes);
  }
  for (; k < K; ++k) qr[k] = static_cast<int8_t>(std::clamp(std::nearbyint(xr[k] * s), -128.0f, 127.0f));
  *inv_scale = 1.0f / s;
}

}  // namespace tritium::cpu
