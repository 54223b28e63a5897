// AVX-512 VNNI kernel of the q6 head format (src/formats/q6_rows.h). A block of 64 columns becomes one zmm of the
// codes u (0..63) in column order: the 32-byte low plane broadcast to both halves, shifted right by 0 / 4 per half
// and masked to 4 bits; the 16-byte high plane broadcast to the four 128-bit lanes and rotated per lane (left by 4,
// 2, 0, right by 2) so the 2 bits of each column sit in bits 4-5; masked and merged by one vpternlogd. Then per
// token one vpdpbusd leaves the int32 sums of u * x over 4 columns in 16 lanes (lanes 0-7: the block's first group,
// 8-15: its second), and one conversion and one FMA by the lanes' group scales add them to the token's float
// accumulator. The codes' bias (u = q + 32) is taken off in float once per 8 groups: s[g] * (-32 * sum of x over
// g) from the token's precomputed group sums (exact in float), so no per-lane correction is loaded for every block.
// A decoded block serves up to 8 tokens from registers. Compiled with -mavx512* (CMakeLists.txt); run only when
// dispatch.h says the CPU has AVX-512 F/BW/VL + VNNI.
// GCC 12: false -Wmaybe-uninitialized / -Wuninitialized inside avx512fintrin.h's broadcast and reduce helpers.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include "kernels/cpu/q6_gemm.h"

namespace tritium::cpu {
namespace {

// Codes are streamed once; a software prefetch this far ahead keeps one core's loads in flight while it computes
// (the hardware prefetcher alone leaves it waiting, as in the i2 GEMV). Prefetches past the end do not fault.
constexpr int64_t kPrefetchBytes = 2048;

template <int T>
void rows_t(const Q6Rows& w, const int8_t* x, const float* xbias, const float* act_scale, int64_t n0, int64_t n1,
            float* y, int64_t ldy) {
  const int64_t K = w.k, blocks = K / 64, G = K / 32, Gp = (G + 7) / 8 * 8, row_bytes = w.row_bytes();
  const __m512i m0f = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30);
  const __m512i lo_shift = _mm512_set_epi64(4, 4, 4, 4, 0, 0, 0, 0);
  const __m512i hi_rot = _mm512_set_epi64(62, 62, 0, 0, 2, 2, 4, 4);
  // Lane i of block j of a quad takes the scale of group 2 j + i / 8.
  __m512i scale_idx[4];
  for (int j = 0; j < 4; ++j)
    scale_idx[j] = _mm512_set_epi32(2 * j + 1, 2 * j + 1, 2 * j + 1, 2 * j + 1, 2 * j + 1, 2 * j + 1, 2 * j + 1,
                                    2 * j + 1, 2 * j, 2 * j, 2 * j, 2 * j, 2 * j, 2 * j, 2 * j, 2 * j);
  for (int64_t r = n0; r < n1; ++r) {
    const uint8_t* cr = w.codes.data() + r * row_bytes;
    const uint16_t* sr = w.scales.data() + r * G;
    __m512 facc[T];
    __m256 bacc[T];
    #pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      facc[t] = _mm512_setzero_ps();
      bacc[t] = _mm256_setzero_ps();
    }
    for (int64_t q = 0; q < blocks; q += 4) {
      const int nb = blocks - q < 4 ? static_cast<int>(blocks - q) : 4;
      // The quad's (up to) 8 group scales as float, lanes past the row's end 0.
      const __m256 s8y = _mm256_cvtph_ps(_mm_maskz_loadu_epi16(static_cast<__mmask8>((1u << (2 * nb)) - 1), sr + 2 * q));
      const __m512 s8 = _mm512_castps256_ps512(s8y);
      #pragma GCC unroll 8
      for (int t = 0; t < T; ++t) bacc[t] = _mm256_fmadd_ps(s8y, _mm256_loadu_ps(xbias + t * Gp + 2 * q), bacc[t]);
      for (int j = 0; j < nb; ++j) {
        const int64_t b = q + j;
        const uint8_t* p = cr + 48 * b;
        _mm_prefetch(reinterpret_cast<const char*>(p + kPrefetchBytes), _MM_HINT_T0);
        const __m512i L = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
        const __m512i H = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 32)));
        const __m512i lo = _mm512_srlv_epi64(L, lo_shift);
        const __m512i hi = _mm512_and_si512(_mm512_rolv_epi64(H, hi_rot), m30);
        const __m512i u = _mm512_ternarylogic_epi32(lo, m0f, hi, 0xEA);  // (lo & 0x0F) | hi
        const __m512 sv = _mm512_permutexvar_ps(scale_idx[j], s8);
        #pragma GCC unroll 8
        for (int t = 0; t < T; ++t) {
          const __m512i xb = _mm512_loadu_si512(x + t * K + 64 * b);
          const __m512i s = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u, xb);
          facc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), sv, facc[t]);
        }
      }
    }
    #pragma GCC unroll 8
    for (int t = 0; t < T; ++t)
      y[t * ldy + r] = act_scale[t] * _mm512_reduce_add_ps(_mm512_add_ps(facc[t], _mm512_zextps256_ps512(bacc[t])));
  }
}

}  // namespace

void q6_gemm_rows_avx512(const Q6Rows& w, const int8_t* x, const float* xbias, const float* act_scale, int T,
                         int64_t n0, int64_t n1, float* y, int64_t ldy) {
  switch (T) {
    case 1: return rows_t<1>(w, x, xbias, act_scale, n0, n1, y, ldy);
    case 2: return rows_t<2>(w, x, xbias, act_scale, n0, n1, y, ldy);
    case 3: return rows_t<3>(w, x, xbias, act_scale, n0, n1, y, ldy);
    case 4: return rows_t<4>(w, x, xbias, act_scale, n0, n1, y, ldy);
    case 5: return rows_t<5>(w, x, xbias, act_scale, n0, n1, y, ldy);
    case 6: return rows_t<6>(w, x, xbias, act_scale, n0, n1, y, ldy);
    case 7: return rows_t<7>(w, x, xbias, act_scale, n0, n1, y, ldy);
    default: return rows_t<8>(w, x, xbias, act_scale, n0, n1, y, ldy);
  }
}

}  // namespace tritium::cpu
