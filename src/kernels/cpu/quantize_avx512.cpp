// AVX-512 per-token absmax int8 quantization (see quantize_rows_absmax_i8 in ops.h): the same float products,
// rounded half to even by vcvtps2dq (default MXCSR rounding) and clamped by signed saturation to int8, so the
// codes are bit-identical to the scalar loop.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace tritium::cpu {

void quantize_row_absmax_i8_avx512(const float* xr, int64_t K, int8_t* qr, float* inv_scale) {
  const __m512 absmask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
  __m512 vmax = _mm512_setzero_ps();
  int64_t k = 0;
  for (; k + 16 <= K; k += 16) vmax = _mm512_max_ps(vmax, _mm512_and_ps(_mm512_loadu_ps(xr + k), absmask));
  float amax = _mm512_reduce_max_ps(vmax);
  for (; k < K; ++k) amax = std::max(amax, std::fabs(xr[k]));
  const float s = 127.0f / std::max(amax, 1e-5f);
  const __m512 vs = _mm512_set1_ps(s);
  k = 0;
  for (; k + 16 <= K; k += 16) {
    const __m512i r = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(xr + k), vs));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(qr + k), _mm512_cvtsepi32_epi8(r));
  }
  for (; k < K; ++k) qr[k] = static_cast<int8_t>(std::clamp(std::nearbyint(xr[k] * s), -128.0f, 127.0f));
  *inv_scale = 1.0f / s;
}

}  // namespace tritium::cpu
