#include "kernels/cpu/q4_gemm.h"

#include <vector>

#include "core/dtype.h"
#include "core/parallel.h"
#include "kernels/cpu/dispatch.h"

namespace tritium {

void q4_gemm_ref(const Q4Rows& w, const int8_t* x, const float* act_scale, int64_t M, float* y) {
  const int64_t N = w.n, K = w.k, G = K / kQ4Group;
  parallel_for(N, 64, [&](int64_t n0, int64_t n1) {
    for (int64_t m = 0; m < M; ++m)
      for (int64_t r = n0; r < n1; ++r) {
        const uint8_t* cr = w.codes.data() + r * K / 2;
        float s = 0.0f;
        for (int64_t g = 0; g < G; ++g) {
          int32_t acc = 0;
          for (int64_t c = g * kQ4Group; c < (g + 1) * kQ4Group; ++c) acc += q4_code(cr, c) * x[m * K + c];
          s += f16_to_f32(w.scales[r * G + g]) * static_cast<float>(acc);
        }
        y[m * N + r] = act_scale[m] * s;
      }
  });
}

void q4_gemm(const Q4Rows& w, const int8_t* x, const float* act_scale, int64_t M, float* y) {
  if (!cpu::has_avx512(cpu::cpu_kernel_path())) {
    q4_gemm_ref(w, x, act_scale, M, y);
    return;
  }
  const int64_t N = w.n, K = w.k;
  std::vector<int32_t> xneg8(static_cast<size_t>(M * K / 4));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t j = 0; j < K / 4; ++j) {
      const int8_t* p = x + m * K + 4 * j;
      xneg8[m * K / 4 + j] = -8 * (p[0] + p[1] + p[2] + p[3]);
    }
  std::vector<float> yt(static_cast<size_t>(N));
  parallel_for(N, 256, [&](int64_t n0, int64_t n1) {
    std::vector<float> tmp(static_cast<size_t>(n1 - n0));
    for (int64_t m = 0; m < M; ++m) {
      cpu::q4_gemv_rows_avx512(w, x + m * K, xneg8.data() + m * K / 4, act_scale[m], n0, n1, tmp.data());
      for (int64_t r = n0; r < n1; ++r) y[m * N + r] = tmp[r - n0];
    }
  });
}

}  // namespace tritium
