#include "kernels/cpu/gemm_bf16.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/parallel.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/gemm_f32.h"

namespace tritium::cpu {

void gemm_bf16w(const float* x, const uint16_t* w, const float* bias, float* y, int64_t M, int64_t N, int64_t K) {
  // Every path reduces each output as gemm_f32 does (8 lanes over increasing k, the fixed horizontal sum, the
  // tail, the bias). Few activation rows (decode): the bf16 rows are widened in registers and read once per row
  // of x. More rows: tiles of weight rows small enough to stay in L2 are widened once and multiplied by the
  // gemm_f32 row kernels, so the widening is shared by every row of x.
  constexpr int64_t kTile = 32;
  const bool avx2 = cpu_kernel_path() != KernelPath::kRef;
  if (avx2 && M <= 2) {
    parallel_for(N, 16, [&](int64_t n0, int64_t n1) { detail::gemm_bf16w_avx2_rows(x, w, bias, y, M, N, K, n0, n1); });
    return;
  }
  parallel_for(N, kTile, [&](int64_t n0, int64_t n1) {
    std::vector<float> wf(static_cast<size_t>(kTile * K));
    std::vector<float> yt(static_cast<size_t>(M * kTile));
    for (int64_t t0 = n0; t0 < n1; t0 += kTile) {
      const int64_t rows = std::min(kTile, n1 - t0);
      const uint16_t* src = w + t0 * K;
      if (avx2) {
        detail::widen_bf16_avx2(src, wf.data(), rows * K);
      } else {
        for (int64_t i = 0; i < rows * K; ++i) {
          const uint32_t bits = static_cast<uint32_t>(src[i]) << 16;
          std::memcpy(&wf[static_cast<size_t>(i)], &bits, 4);
        }
      }
      const float* b = bias ? bias + t0 : nullptr;
      if (avx2) detail::gemm_f32_avx2_rows(x, wf.data(), b, yt.data(), M, rows, K, 0, rows);
      else detail::gemm_f32_ref_rows(x, wf.data(), b, yt.data(), M, rows, K, 0, rows);
      for (int64_t m = 0; m < M; ++m) std::memcpy(y + m * N + t0, &yt[static_cast<size_t>(m * rows)], rows * 4);
    }
  });
}

}  // namespace tritium::cpu
