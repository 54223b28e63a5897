#include "kernels/cpu/q6_gemm.h"

#include <algorithm>

#include "core/parallel.h"
#include "core/scratch.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/grouped_head.h"

namespace tritium {

void q6_gemm_ref(const Q6Rows& w, const int8_t* x, const float* act_scale, int64_t M, float* y) {
  cpu::grouped_head_gemm_ref(w.codes.data(), w.row_bytes(), w.scales.data(), w.n, w.k, x, act_scale, M, y,
                             [](const uint8_t* row, int64_t col) { return q6_code(row, col); });
}

namespace {

// Rows in chunks of 128 (266 KB of codes and scales at K = 2560, held in L2 while each tile of up to 8 tokens
// passes over them), chunks spread over the threads.
void q6_gemm_avx512(const Q6Rows& w, const int8_t* x, const float* act_scale, int64_t M, float* y) {
  constexpr int64_t kRowChunk = 128, kTile = 8;
  const int64_t N = w.n, K = w.k, G = K / kQ6Group, Gp = (G + 7) / 8 * 8;
  thread_local Scratch<float> bias_scratch;
  float* xbias = bias_scratch.get(static_cast<size_t>(M * Gp));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t g = 0; g < Gp; ++g) {
      int32_t s = 0;
      if (g < G)
        for (int64_t c = g * kQ6Group; c < (g + 1) * kQ6Group; ++c) s += x[m * K + c];
      xbias[m * Gp + g] = static_cast<float>(-32 * s);
    }
  parallel_for(N, 256, [&](int64_t n0, int64_t n1) {
    for (int64_t r0 = n0; r0 < n1; r0 += kRowChunk) {
      const int64_t r1 = std::min(n1, r0 + kRowChunk);
      for (int64_t m = 0; m < M; m += kTile)
        cpu::q6_gemm_rows_avx512(w, x + m * K, xbias + m * Gp, act_scale + m,
                                 static_cast<int>(std::min(kTile, M - m)), r0, r1, y + m * N, N);
    }
  });
}

}  // namespace

void q6_gemm(const Q6Rows& w, const int8_t* x, const float* act_scale, int64_t M, float* y) {
  if (cpu::has_avx512(cpu::cpu_kernel_path())) {
    q6_gemm_avx512(w, x, act_scale, M, y);
    return;
  }
  if (!cpu::grouped_head_simd()) {
    q6_gemm_ref(w, x, act_scale, M, y);
    return;
  }
  cpu::grouped_head_gemm(w.n, w.k, x, act_scale, M, y, 32,
                         [&](const int8_t* xt, const int32_t* xoff, const float* st, int T, int64_t r0, int64_t r1,
                             float* yt, int64_t ldy) { cpu::q6_gemm_rows_avx2(w, xt, xoff, st, T, r0, r1, yt, ldy); });
}

}  // namespace tritium
