#include "kernels/cpu/gemm_f32.h"

#include <cstdlib>
#include <cstring>

#include "core/parallel.h"
#include "kernels/cpu/dispatch.h"

namespace tritium::cpu {
namespace detail {

// 8 lanes of partial sums over k = 8j + lane, then the lanes summed pairwise as the AVX2 path does,
// then the scalar tail. Keeping this order identical lets tests demand bit equality.
static float dot_ref(const float* a, const float* b, int64_t K) {
  float acc[8] = {};
  int64_t k = 0;
  for (; k + 8 <= K; k += 8)
    for (int l = 0; l < 8; ++l) acc[l] = __builtin_fmaf(a[k + l], b[k + l], acc[l]);
  // horizontal: (0+4, 1+5, 2+6, 3+7) then (0+2, 1+3) then (0+1)
  float h4[4], h2[2];
  for (int l = 0; l < 4; ++l) h4[l] = acc[l] + acc[l + 4];
  for (int l = 0; l < 2; ++l) h2[l] = h4[l] + h4[l + 2];
  float s = h2[0] + h2[1];
  for (; k < K; ++k) s = __builtin_fmaf(a[k], b[k], s);
  return s;
}

void gemm_f32_ref_rows(const float* x, const float* w, const float* bias, float* y, int64_t M, int64_t N,
                       int64_t K, int64_t n0, int64_t n1) {
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = n0; n < n1; ++n) {
      float s = dot_ref(x + m * K, w + n * K, K);
      y[m * N + n] = bias ? s + bias[n] : s;
    }
}

}  // namespace detail

// Follows the process-wide kernel path (TRITIUM_KERNEL / set_cpu_kernel_path): ref forces the portable loop.
static bool use_avx2() { return cpu_kernel_path() != KernelPath::kRef; }

void gemm_f32(const float* x, const float* w, const float* bias, float* y, int64_t M, int64_t N, int64_t K) {
  const bool avx2 = use_avx2();
  parallel_for(N, 16, [&](int64_t n0, int64_t n1) {
    if (avx2) detail::gemm_f32_avx2_rows(x, w, bias, y, M, N, K, n0, n1);
    else detail::gemm_f32_ref_rows(x, w, bias, y, M, N, K, n0, n1);
  });
}

void gemm_f32_ref(const float* x, const float* w, const float* bias, float* y, int64_t M, int64_t N, int64_t K) {
  detail::gemm_f32_ref_rows(x, w, bias, y, M, N, K, 0, N);
}

}  // namespace tritium::cpu
