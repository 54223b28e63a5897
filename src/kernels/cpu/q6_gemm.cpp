#include "kernels/cpu/q6_gemm.h"

#include <vector>

#include "core/dtype.h"
#include "core/parallel.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/grouped_head.h"

namespace tritium {

void q6_gemm_ref(const Q6Rows& w, const int8_t* x, const float* act_scale, int64_t M, float* y) {
  const int64_t N = w.n, K = w.k, G = K / kQ6Group, rb = w.row_bytes();
  parallel_for(N, 64, [&](int64_t n0, int64_t n1) {
    for (int64_t m = 0; m < M; ++m)
      for (int64_t r = n0; r < n1; ++r) {
        const uint8_t* cr = w.codes.data() + r * rb;
        float s = 0.0f;
        for (int64_t g = 0; g < G; ++g) {
          int32_t acc = 0;
          for (int64_t c = g * kQ6Group; c < (g + 1) * kQ6Group; ++c) acc += q6_code(cr, c) * x[m * K + c];
          s += f16_to_f32(w.scales[r * G + g]) * static_cast<float>(acc);
        }
        y[m * N + r] = act_scale[m] * s;
      }
  });
}

void q6_gemm(const Q6Rows& w, const int8_t* x, const float* act_scale, int64_t M, float* y) {
  // The AVX2 kernel serves AVX-512 machines too: it is the SIMD path that has run on hardware (bench/RESULTS.md).
  const cpu::KernelPath path = cpu::cpu_kernel_path();
  if (path != cpu::KernelPath::kAvx2 && !cpu::has_avx512(path)) {
    q6_gemm_ref(w, x, act_scale, M, y);
    return;
  }
  const int64_t N = w.n, K = w.k;
  const std::vector<int32_t> off = cpu::grouped_head_offsets(x, M, K, 32);
  const int64_t off_stride = cpu::grouped_head_offset_stride(K);
  cpu::for_each_head_tile(N, M, [&](int64_t m, int T, int64_t r0, int64_t r1) {
    cpu::q6_gemm_rows_avx2(w, x + m * K, off.data() + m * off_stride, act_scale + m, T, r0, r1, y + m * N, N);
  });
}

}  // namespace tritium
