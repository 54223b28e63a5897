// AVX2 kernel of the q4 head format (src/formats/q4_rows.h); AVX-512 machines run q4_gemm_avx512.cpp.
// Decoding of a block of 64 columns: its 32 bytes masked (columns 0..31, the first group) and shifted right by 4
// then masked (columns 32..63, the second group): u (1..15) in column order. The products and sums:
// grouped_head_avx2.h.
#include "kernels/cpu/grouped_head_avx2.h"
#include "kernels/cpu/q4_gemm.h"

namespace tritium::cpu {

void q4_gemm_rows_avx2(const Q4Rows& w, const int8_t* x, const int32_t* xoff, const float* act_scale, int T,
                       int64_t n0, int64_t n1, float* y, int64_t ldy) {
  const __m256i m0f = _mm256_set1_epi8(0x0F);
  auto decode = [&](const uint8_t* row, int64_t b, __m256i& ua, __m256i& ub) {
    const __m256i L = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 32 * b));
    ua = _mm256_and_si256(L, m0f);
    ub = _mm256_and_si256(_mm256_srli_epi16(L, 4), m0f);
  };
  grouped_head::rows_any(T, w.codes.data(), w.k / 2, w.scales.data(), w.k, x, xoff, act_scale, n0, n1, y, ldy,
                         decode);
}

}  // namespace tritium::cpu
