// AVX-512 VNNI int8 kernels. vpdpbusd multiplies unsigned x signed bytes, so activations enter as
// xu = x + 128 (uint8, the caller xors 0x80) and the offset is removed exactly afterwards:
//   sum_k x[k] w[k] = sum_k xu[k] w[k] - 128 * sum_k w[k]      (rowsum precomputed per weight)
// vpdpbusd does not saturate; |partial sums| <= 255 * 127 * K fits int32 for K <= 65536.
// K tails use masked byte loads (zero w bytes contribute nothing whatever xu holds there).
// GCC 12 reports a false -Wmaybe-uninitialized inside its own avx512fintrin.h helpers
// (_mm512_undefined_* used by the reduce intrinsics) once they are inlined here.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "kernels/cpu/int8_gemm.h"

namespace tritium::int8_detail {
namespace {
inline __mmask64 tail_mask(int64_t r) { return r >= 64 ? ~__mmask64{0} : ((__mmask64{1} << r) - 1); }
}  // namespace

void gemm_avx512(const uint8_t* xu, const int8_t* w, const int32_t* w_row_sum, int64_t M, int64_t N,
                 int64_t K, int32_t* acc, int64_t n0, int64_t n1) {
  const int64_t K64 = K & ~int64_t{63};
  const __mmask64 tm = tail_mask(K - K64);
  int64_t n = n0;
  for (; n + 4 <= n1; n += 4) {
    const int8_t* w0 = w + n * K;
    const int8_t* w1 = w0 + K;
    const int8_t* w2 = w1 + K;
    const int8_t* w3 = w2 + K;
    const int32_t c0 = 128 * w_row_sum[n], c1 = 128 * w_row_sum[n + 1];
    const int32_t c2 = 128 * w_row_sum[n + 2], c3 = 128 * w_row_sum[n + 3];
    int64_t m = 0;
    for (; m + 2 <= M; m += 2) {  // 2 tokens x 4 output rows: 6 loads feed 8 vpdpbusd
      const uint8_t* xa = xu + m * K;
      const uint8_t* xb = xa + K;
      __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
      __m512i b0 = a0, b1 = a0, b2 = a0, b3 = a0;
      for (int64_t k = 0; k < K64; k += 64) {
        const __m512i xva = _mm512_loadu_si512(xa + k), xvb = _mm512_loadu_si512(xb + k);
        __m512i wv = _mm512_loadu_si512(w0 + k);
        a0 = _mm512_dpbusd_epi32(a0, xva, wv);
        b0 = _mm512_dpbusd_epi32(b0, xvb, wv);
        wv = _mm512_loadu_si512(w1 + k);
        a1 = _mm512_dpbusd_epi32(a1, xva, wv);
        b1 = _mm512_dpbusd_epi32(b1, xvb, wv);
        wv = _mm512_loadu_si512(w2 + k);
        a2 = _mm512_dpbusd_epi32(a2, xva, wv);
        b2 = _mm512_dpbusd_epi32(b2, xvb, wv);
        wv = _mm512_loadu_si512(w3 + k);
        a3 = _mm512_dpbusd_epi32(a3, xva, wv);
        b3 = _mm512_dpbusd_epi32(b3, xvb, wv);
      }
      if (K64 < K) {
        const __m512i xva = _mm512_maskz_loadu_epi8(tm, xa + K64), xvb = _mm512_maskz_loadu_epi8(tm, xb + K64);
        __m512i wv = _mm512_maskz_loadu_epi8(tm, w0 + K64);
        a0 = _mm512_dpbusd_epi32(a0, xva, wv);
        b0 = _mm512_dpbusd_epi32(b0, xvb, wv);
        wv = _mm512_maskz_loadu_epi8(tm, w1 + K64);
        a1 = _mm512_dpbusd_epi32(a1, xva, wv);
        b1 = _mm512_dpbusd_epi32(b1, xvb, wv);
        wv = _mm512_maskz_loadu_epi8(tm, w2 + K64);
        a2 = _mm512_dpbusd_epi32(a2, xva, wv);
        b2 = _mm512_dpbusd_epi32(b2, xvb, wv);
        wv = _mm512_maskz_loadu_epi8(tm, w3 + K64);
        a3 = _mm512_dpbusd_epi32(a3, xva, wv);
        b3 = _mm512_dpbusd_epi32(b3, xvb, wv);
      }
      int32_t* oa = acc + m * N + n;
      int32_t* ob = oa + N;
      oa[0] = _mm512_reduce_add_epi32(a0) - c0;
      oa[1] = _mm512_reduce_add_epi32(a1) - c1;
      oa[2] = _mm512_reduce_add_epi32(a2) - c2;
      oa[3] = _mm512_reduce_add_epi32(a3) - c3;
      ob[0] = _mm512_reduce_add_epi32(b0) - c0;
      ob[1] = _mm512_reduce_add_epi32(b1) - c1;
      ob[2] = _mm512_reduce_add_epi32(b2) - c2;
      ob[3] = _mm512_reduce_add_epi32(b3) - c3;
    }
    for (; m < M; ++m) {
      const uint8_t* xa = xu + m * K;
      __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
      for (int64_t k = 0; k < K64; k += 64) {
        const __m512i xva = _mm512_loadu_si512(xa + k);
        a0 = _mm512_dpbusd_epi32(a0, xva, _mm512_loadu_si512(w0 + k));
        a1 = _mm512_dpbusd_epi32(a1, xva, _mm512_loadu_si512(w1 + k));
        a2 = _mm512_dpbusd_epi32(a2, xva, _mm512_loadu_si512(w2 + k));
        a3 = _mm512_dpbusd_epi32(a3, xva, _mm512_loadu_si512(w3 + k));
      }
      if (K64 < K) {
        const __m512i xva = _mm512_maskz_loadu_epi8(tm, xa + K64);
        a0 = _mm512_dpbusd_epi32(a0, xva, _mm512_maskz_loadu_epi8(tm, w0 + K64));
        a1 = _mm512_dpbusd_epi32(a1, xva, _mm512_maskz_loadu_epi8(tm, w1 + K64));
        a2 = _mm512_dpbusd_epi32(a2, xva, _mm512_maskz_loadu_epi8(tm, w2 + K64));
        a3 = _mm512_dpbusd_epi32(a3, xva, _mm512_maskz_loadu_epi8(tm, w3 + K64));
      }
      int32_t* oa = acc + m * N + n;
      oa[0] = _mm512_reduce_add_epi32(a0) - c0;
      oa[1] = _mm512_reduce_add_epi32(a1) - c1;
      oa[2] = _mm512_reduce_add_epi32(a2) - c2;
      oa[3] = _mm512_reduce_add_epi32(a3) - c3;
    }
  }
  for (; n < n1; ++n) {
    const int8_t* wr = w + n * K;
    const int32_t c = 128 * w_row_sum[n];
    for (int64_t m = 0; m < M; ++m) {
      const uint8_t* xa = xu + m * K;
      __m512i a = _mm512_setzero_si512();
      for (int64_t k = 0; k < K64; k += 64) a = _mm512_dpbusd_epi32(a, _mm512_loadu_si512(xa + k), _mm512_loadu_si512(wr + k));
      if (K64 < K) a = _mm512_dpbusd_epi32(a, _mm512_maskz_loadu_epi8(tm, xa + K64), _mm512_maskz_loadu_epi8(tm, wr + K64));
      acc[m * N + n] = _mm512_reduce_add_epi32(a) - c;
    }
  }
}

void gemm_f32s8_avx512(const float* x, const int8_t* w, const float* w_scale, int64_t M, int64_t N,
                       int64_t K, float* y, int64_t n0, int64_t n1) {
  const int64_t K16 = K & ~int64_t{15};
  const __mmask16 tm = static_cast<__mmask16>((1u << (K - K16)) - 1u);
  for (int64_t n = n0; n < n1; ++n) {
    const int8_t* wr = w + n * K;
    for (int64_t m = 0; m < M; ++m) {
      const float* xr = x + m * K;
      __m512 a = _mm512_setzero_ps();
      for (int64_t k = 0; k < K16; k += 16) {
        const __m512 wv = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wr + k))));
        a = _mm512_fmadd_ps(_mm512_loadu_ps(xr + k), wv, a);
      }
      if (K16 < K) {
        const __m512 wv = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(tm, wr + K16)));
        a = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tm, xr + K16), wv, a);
      }
      y[m * N + n] = _mm512_reduce_add_ps(a) * w_scale[n];
    }
  }
}

}  // namespace tritium::int8_detail
