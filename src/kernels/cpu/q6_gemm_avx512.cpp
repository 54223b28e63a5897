// AVX-512 VNNI kernel of the q6 head format (src/formats/q6_rows.h). A block of 64 columns becomes one zmm of the
// codes u (0..63) in column order: the 32-byte low plane broadcast to both halves, shifted right by 0 / 4 per half
// and masked to 4 bits; the 16-byte high plane broadcast to the four 128-bit lanes and rotated per lane (left by 4,
// 2, 0, right by 2) so the 2 bits of each column sit in bits 4-5; masked and merged by one vpternlogd. The products
// and sums: grouped_head_avx512.h. Compiled with -mavx512* (CMakeLists.txt); run only when dispatch.h says the CPU
// has AVX-512 F/BW/VL + VNNI.
// GCC 12: false -Wmaybe-uninitialized / -Wuninitialized inside avx512fintrin.h's broadcast and reduce helpers.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include "kernels/cpu/grouped_head_avx512.h"
#include "kernels/cpu/q6_gemm.h"

namespace tritium::cpu {

void q6_gemm_rows_avx512(const Q6Rows& w, const int8_t* x, const float* xbias, const float* act_scale, int T,
                         int64_t n0, int64_t n1, float* y, int64_t ldy) {
  const __m512i m0f = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30);
  const __m512i lo_shift = _mm512_set_epi64(4, 4, 4, 4, 0, 0, 0, 0);
  const __m512i hi_rot = _mm512_set_epi64(62, 62, 0, 0, 2, 2, 4, 4);
  auto decode = [&](const uint8_t* p) {
    const __m512i L = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    const __m512i H = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 32)));
    const __m512i lo = _mm512_srlv_epi64(L, lo_shift);
    const __m512i hi = _mm512_and_si512(_mm512_rolv_epi64(H, hi_rot), m30);
    return _mm512_ternarylogic_epi32(lo, m0f, hi, 0xEA);  // (lo & 0x0F) | hi
  };
  grouped_head_avx512::rows_any(T, w.codes.data(), w.row_bytes(), 48, w.scales.data(), w.k, x, xbias, act_scale, n0,
                                n1, y, ldy, decode);
}

}  // namespace tritium::cpu
