// AVX-512 VNNI kernel of the q4 head format (src/formats/q4_rows.h). A block of 64 columns becomes one zmm of the
// codes u (1..15) in column order: its 32 bytes broadcast to both halves, shifted right by 0 / 4 per half and
// masked to 4 bits. The products and sums: grouped_head_avx512.h. Compiled with -mavx512* (CMakeLists.txt); run
// only when dispatch.h says the CPU has AVX-512 F/BW/VL + VNNI.
// GCC 12: false -Wmaybe-uninitialized / -Wuninitialized inside avx512fintrin.h's broadcast and reduce helpers.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include "kernels/cpu/grouped_head_avx512.h"
#include "kernels/cpu/q4_gemm.h"

namespace tritium::cpu {

void q4_gemm_rows_avx512(const Q4Rows& w, const int8_t* x, const float* xbias, const float* act_scale, int T,
                         int64_t n0, int64_t n1, float* y, int64_t ldy) {
  const __m512i m0f = _mm512_set1_epi8(0x0F);
  const __m512i shift = _mm512_set_epi64(4, 4, 4, 4, 0, 0, 0, 0);
  auto decode = [&](const uint8_t* p) {
    const __m512i L = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return _mm512_and_si512(_mm512_srlv_epi64(L, shift), m0f);
  };
  grouped_head_avx512::rows_any(T, w.codes.data(), w.k / 2, 32, w.scales.data(), w.k, x, xbias, act_scale, n0, n1,
                                y, ldy, decode);
}

}  // namespace tritium::cpu
