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

namespace {

// The per-token activation terms of x (fill writes M * stride of them into the calling thread's scratch), then
// rows(m, token m's terms, T, r0, r1) over every chunk and tile of walk_tiles.
template <class Term, class Fill, class Rows>
void walk_with_terms(int64_t N, int64_t M, int64_t stride, int64_t tile, Fill fill, Rows rows) {
  thread_local Scratch<Term> scratch;
  Term* terms = scratch.get(static_cast<size_t>(M * stride));
  fill(terms);
  walk_tiles(N, M, tile, [&](int64_t m, int T, int64_t r0, int64_t r1) { rows(m, terms + m * stride, T, r0, r1); });
}

}  // namespace

void grouped_head_gemm(int64_t N, int64_t K, const int8_t* x, const float* act_scale, int64_t M, float* y,
                       int32_t bias, const GroupedHeadRows& avx2_rows, const GroupedHeadRowsAvx512& avx512_rows) {
  if (has_avx512(cpu_kernel_path())) {
    walk_with_terms<float>(
        N, M, grouped_head_bias_stride(K), 8, [&](float* t) { grouped_head_bias_sums(x, M, K, bias, t); },
        [&](int64_t m, const float* xbias, int T, int64_t r0, int64_t r1) {
          avx512_rows(x + m * K, xbias, act_scale + m, T, r0, r1, y + m * N, N);
        });
    return;
  }
  walk_with_terms<int32_t>(
      N, M, grouped_head_offset_stride(K), 4, [&](int32_t* t) { grouped_head_offsets(x, M, K, bias, t); },
      [&](int64_t m, const int32_t* xoff, int T, int64_t r0, int64_t r1) {
        avx2_rows(x + m * K, xoff, act_scale + m, T, r0, r1, y + m * N, N);
      });
}

}  // namespace tritium::cpu
