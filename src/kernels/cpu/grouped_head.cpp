#include "kernels/cpu/grouped_head.h"

#include <algorithm>

#include "core/parallel.h"
#include "core/scratch.h"
#include "kernels/cpu/dispatch.h"

namespace tritium::cpu {
namespace {

int32_t group_sum(const int8_t* xr, int64_t g) {
  int32_t s = 0;
  for (int64_t c = g * 32; c < (g + 1) * 32; ++c) s += xr[c];
  return s;
}

// fn(m, T, r0, r1) for every chunk [r0, r1) of up to 128 rows of [0, N) and every tile [m, m + T) of up to `tile`
// tokens of [0, M), the chunks spread over the threads.
void walk_tiles(int64_t N, int64_t M, int64_t tile, const std::function<void(int64_t, int, int64_t, int64_t)>& fn) {
  constexpr int64_t kRowChunk = 128;
  parallel_for(N, 256, [&](int64_t n0, int64_t n1) {
    for (int64_t r0 = n0; r0 < n1; r0 += kRowChunk) {
      const int64_t r1 = std::min(n1, r0 + kRowChunk);
      for (int64_t m = 0; m < M; m += tile) fn(m, static_cast<int>(std::min(tile, M - m)), r0, r1);
    }
  });
}

}  // namespace

void grouped_head_offsets(const int8_t* x, int64_t M, int64_t K, int32_t bias, int32_t* off) {
  const int64_t G = K / 32, stride = grouped_head_offset_stride(K);
  std::fill(off, off + M * stride, 0);
  for (int64_t m = 0; m < M; ++m) {
    int32_t* o = off + m * stride;
    for (int64_t g = 0; g < G; ++g)
      o[g / 4 * 8 + g % 4] = o[g / 4 * 8 + 4 + g % 4] = -(bias / 2) * group_sum(x + m * K, g);
  }
}

void grouped_head_bias_sums(const int8_t* x, int64_t M, int64_t K, int32_t bias, float* out) {
  const int64_t G = K / 32, stride = grouped_head_bias_stride(K);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t g = 0; g < stride; ++g)
      out[m * stride + g] = g < G ? static_cast<float>(-bias * group_sum(x + m * K, g)) : 0.0f;
}

bool grouped_head_simd() {
  const KernelPath path = cpu_kernel_path();
  return path == KernelPath::kAvx2 || has_avx512(path);
}

void grouped_head_gemm(int64_t N, int64_t K, const int8_t* x, const float* act_scale, int64_t M, float* y,
                       int32_t bias, const GroupedHeadRows& avx2_rows, const GroupedHeadRowsAvx512& avx512_rows) {
  if (has_avx512(cpu_kernel_path())) {
    const int64_t stride = grouped_head_bias_stride(K);
    thread_local Scratch<float> bias_scratch;
    float* xbias = bias_scratch.get(static_cast<size_t>(M * stride));
    grouped_head_bias_sums(x, M, K, bias, xbias);
    walk_tiles(N, M, 8, [&](int64_t m, int T, int64_t r0, int64_t r1) {
      avx512_rows(x + m * K, xbias + m * stride, act_scale + m, T, r0, r1, y + m * N, N);
    });
    return;
  }
  const int64_t stride = grouped_head_offset_stride(K);
  thread_local Scratch<int32_t> off_scratch;
  int32_t* off = off_scratch.get(static_cast<size_t>(M * stride));
  grouped_head_offsets(x, M, K, bias, off);
  walk_tiles(N, M, 4, [&](int64_t m, int T, int64_t r0, int64_t r1) {
    avx2_rows(x + m * K, off + m * stride, act_scale + m, T, r0, r1, y + m * N, N);
  });
}

}  // namespace tritium::cpu
