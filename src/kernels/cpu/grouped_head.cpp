#include "kernels/cpu/grouped_head.h"

#include <algorithm>

#include "core/parallel.h"
#include "core/scratch.h"
#include "kernels/cpu/dispatch.h"

namespace tritium::cpu {

void grouped_head_offsets(const int8_t* x, int64_t M, int64_t K, int32_t bias, int32_t* off) {
  const int64_t G = K / 32, stride = grouped_head_offset_stride(K);
  std::fill(off, off + M * stride, 0);
  for (int64_t m = 0; m < M; ++m) {
    const int8_t* xr = x + m * K;
    int32_t* o = off + m * stride;
    for (int64_t g = 0; g < G; ++g) {
      int32_t s = 0;
      for (int64_t c = g * 32; c < (g + 1) * 32; ++c) s += xr[c];
      o[g / 4 * 8 + g % 4] = o[g / 4 * 8 + 4 + g % 4] = -(bias / 2) * s;
    }
  }
}

void grouped_head_bias_sums(const int8_t* x, int64_t M, int64_t K, int32_t bias, float* out) {
  const int64_t G = K / 32, stride = grouped_head_bias_stride(K);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t g = 0; g < stride; ++g) {
      int32_t s = 0;
      if (g < G)
        for (int64_t c = g * 32; c < (g + 1) * 32; ++c) s += x[m * K + c];
      out[m * stride + g] = static_cast<float>(-bias * s);
    }
}

void grouped_head_gemm_avx512(int64_t N, int64_t K, const int8_t* x, const float* act_scale, int64_t M, float* y,
                              int32_t bias, const GroupedHeadRowsAvx512& rows) {
  constexpr int64_t kRowChunk = 128, kTile = 8;
  const int64_t stride = grouped_head_bias_stride(K);
  thread_local Scratch<float> bias_scratch;
  float* xbias = bias_scratch.get(static_cast<size_t>(M * stride));
  grouped_head_bias_sums(x, M, K, bias, xbias);
  parallel_for(N, 256, [&](int64_t n0, int64_t n1) {
    for (int64_t r0 = n0; r0 < n1; r0 += kRowChunk) {
      const int64_t r1 = std::min(n1, r0 + kRowChunk);
      for (int64_t m = 0; m < M; m += kTile)
        rows(x + m * K, xbias + m * stride, act_scale + m, static_cast<int>(std::min(kTile, M - m)), r0, r1,
             y + m * N, N);
    }
  });
}

bool grouped_head_simd() {
  const KernelPath path = cpu_kernel_path();
  return path == KernelPath::kAvx2 || has_avx512(path);
}

void grouped_head_gemm(int64_t N, int64_t K, const int8_t* x, const float* act_scale, int64_t M, float* y,
                       int32_t bias, const GroupedHeadRows& rows) {
  constexpr int64_t kRowChunk = 128;
  const int64_t off_stride = grouped_head_offset_stride(K);
  thread_local Scratch<int32_t> off_scratch;
  int32_t* off = off_scratch.get(static_cast<size_t>(M * off_stride));
  grouped_head_offsets(x, M, K, bias, off);
  parallel_for(N, 256, [&](int64_t n0, int64_t n1) {
    for (int64_t r0 = n0; r0 < n1; r0 += kRowChunk) {
      const int64_t r1 = std::min(n1, r0 + kRowChunk);
      for (int64_t m = 0; m < M; m += 4)
        rows(x + m * K, off + m * off_stride, act_scale + m, static_cast<int>(std::min<int64_t>(4, M - m)),
             r0, r1, y + m * N, N);
    }
  });
}

}  // namespace tritium::cpu
