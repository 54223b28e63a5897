// AVX2 kernel of the q6 head format (src/formats/q6_rows.h); AVX-512 machines run q6_gemm_avx512.cpp.
// Decoding of a block of 64 columns: the 32-byte low plane masked (columns 0..31) and shifted by 4 (columns
// 32..63); the 16-byte high plane broadcast to both 128-bit lanes and shifted per lane (left by 4 / 2 for columns
// 0..15 / 16..31, right by 0 / 2 for 32..47 / 48..63) so each field sits in bits 4-5; masked and or-ed: u (0..63)
// of each group of 32 in column order. The products and sums: grouped_head_avx2.h.
#include "kernels/cpu/grouped_head_avx2.h"
#include "kernels/cpu/q6_gemm.h"

namespace tritium::cpu {

void q6_gemm_rows_avx2(const Q6Rows& w, const int8_t* x, const int32_t* xoff, const float* act_scale, int T,
                       int64_t n0, int64_t n1, float* y, int64_t ldy) {
  const __m256i m0f = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30);
  const __m256i shl_a = _mm256_set_epi32(2, 2, 2, 2, 4, 4, 4, 4), shr_b = _mm256_set_epi32(2, 2, 2, 2, 0, 0, 0, 0);
  auto decode = [&](const uint8_t* row, int64_t b, __m256i& ua, __m256i& ub) {
    const uint8_t* p = row + 48 * b;
    const __m256i L = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    const __m256i H = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 32)));
    ua = _mm256_or_si256(_mm256_and_si256(L, m0f), _mm256_and_si256(_mm256_sllv_epi32(H, shl_a), m30));
    ub = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(L, 4), m0f),
                         _mm256_and_si256(_mm256_srlv_epi32(H, shr_b), m30));
  };
  grouped_head::rows_any(T, w.codes.data(), w.row_bytes(), w.scales.data(), w.k, x, xoff, act_scale, n0, n1, y, ldy,
                         decode);
}

}  // namespace tritium::cpu
