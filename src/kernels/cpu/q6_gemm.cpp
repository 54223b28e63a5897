#include "kernels/cpu/q6_gemm.h"

#include "kernels/cpu/grouped_head.h"

namespace tritium {

void q6_gemm_ref(const Q6Rows& w, const int8_t* x, const float* act_scale, int64_t M, float* y) {
  cpu::grouped_head_gemm_ref(w.codes.data(), w.row_bytes(), w.scales.data(), w.n, w.k, x, act_scale, M, y,
                             [](const uint8_t* row, int64_t col) { return q6_code(row, col); });
}

void q6_gemm(const Q6Rows& w, const int8_t* x, const float* act_scale, int64_t M, float* y) {
  cpu::grouped_head_product(w, x, act_scale, M, y, 32, &q6_gemm_ref, &cpu::q6_gemm_rows_avx2,
                            &cpu::q6_gemm_rows_avx512);
}

}  // namespace tritium
