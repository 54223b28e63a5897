#include "kernels/cpu/q4_gemm.h"

#include "kernels/cpu/grouped_head.h"

namespace tritium {

void q4_gemm_ref(const Q4Rows& w, const int8_t* x, const float* act_scale, int64_t M, float* y) {
  cpu::grouped_head_gemm_ref(w.codes.data(), w.k / 2, w.scales.data(), w.n, w.k, x, act_scale, M, y,
                             [](const uint8_t* row, int64_t col) { return q4_code(row, col); });
}

void q4_gemm(const Q4Rows& w, const int8_t* x, const float* act_scale, int64_t M, float* y) {
  cpu::grouped_head_product(w, x, act_scale, M, y, 8, &q4_gemm_ref, &cpu::q4_gemm_rows_avx2,
                            &cpu::q4_gemm_rows_avx512);
}

}  // namespace tritium
