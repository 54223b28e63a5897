#include "kernels/cpu/q6_gemm.h"

#include "kernels/cpu/grouped_head.h"

namespace tritium {

void q6_gemm_ref(const Q6Rows& w, const int8_t* x, const float* act_scale, int64_t M, float* y) {
  cpu::grouped_head_gemm_ref(w.codes.data(), w.row_bytes(), w.scales.data(), w.n, w.k, x, act_scale, M, y,
                             [](const uint8_t* row, int64_t col) { return q6_code(row, col); });
}

void q6_gemm(const Q6Rows& w, const int8_t* x, const float* act_scale, int64_t M, float* y) {
  if (!cpu::grouped_head_simd()) {
    q6_gemm_ref(w, x, act_scale, M, y);
    return;
  }
  cpu::grouped_head_gemm(
      w.n, w.k, x, act_scale, M, y, 32,
      [&](const int8_t* xt, const int32_t* xoff, const float* st, int T, int64_t r0, int64_t r1, float* yt,
          int64_t ldy) { cpu::q6_gemm_rows_avx2(w, xt, xoff, st, T, r0, r1, yt, ldy); },
      [&](const int8_t* xt, const float* xbias, const float* st, int T, int64_t r0, int64_t r1, float* yt,
          int64_t ldy) { cpu::q6_gemm_rows_avx512(w, xt, xbias, st, T, r0, r1, yt, ldy); });
}

}  // namespace tritium
