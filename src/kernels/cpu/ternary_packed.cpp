// The ternary GEMMs over a PackedTernary of any format: the tiled formats (i2, tq1, bitcos) run the tiled
// kernels on their view; the int8 format (the unpacked baseline) runs plain loops.
#include <algorithm>
#include <vector>

#include "core/dtype.h"
#include "core/parallel.h"
#include "formats/ternary_int8.h"
#include "formats/ternary_tiled.h"
#include "kernels/cpu/ternary_kernels.h"

namespace tritium::cpu {
namespace {

void int8_gemm_i32(const TernaryInt8& w, const int8_t* x, int64_t M, int32_t* acc) {
  const int64_t N = w.rows(), K = w.cols();
  const int8_t* W = w.data();
  parallel_for(N, 16, [&](int64_t n0, int64_t n1) {
    for (int64_t m = 0; m < M; ++m) {
      const int8_t* xr = x + m * K;
      for (int64_t n = n0; n < n1; ++n) {
        const int8_t* wr = W + n * K;
        int32_t s = 0;
        for (int64_t k = 0; k < K; ++k) s += static_cast<int32_t>(xr[k]) * wr[k];
        acc[m * N + n] = s;
      }
    }
  });
}

// Unpacks, then exact int32 sums per group of 128, combined in increasing group order.
void int8_gemm_f32(const PackedTernary& p, const int8_t* x, const float* act_scale, int64_t M,
                   const float* group_scales, float* y) {
  const int64_t N = p.rows(), K = p.cols(), G = p.groups();
  std::vector<int8_t> w(static_cast<size_t>(N * K));
  p.unpack(w.data());
  parallel_for(N, 16, [&](int64_t n0, int64_t n1) {
    for (int64_t m = 0; m < M; ++m) {
      const int8_t* xr = x + m * K;
      for (int64_t n = n0; n < n1; ++n) {
        const int8_t* wr = w.data() + n * K;
        float s = 0.0f;
        for (int64_t g = 0; g < G; ++g) {
          int32_t acc = 0;
          for (int64_t k = g * kTernaryGroupK; k < std::min(K, (g + 1) * kTernaryGroupK); ++k) acc += xr[k] * wr[k];
          s += group_scales[((n / 16) * G + g) * 16 + n % 16] * static_cast<float>(acc);
        }
        y[m * N + n] = act_scale[m] * s;
      }
    }
  });
}

}  // namespace

void ternary_gemm_i32(const PackedTernary& w, const int8_t* x, int64_t M, int32_t* acc) {
  if (const auto* t = dynamic_cast<const TiledTernary*>(&w)) return ternary_gemm_i32(t->view(), x, M, acc);
  return int8_gemm_i32(dynamic_cast<const TernaryInt8&>(w), x, M, acc);
}

void ternary_gemm_f32(const PackedTernary& w, const int8_t* x, const float* act_scale, int64_t M,
                      const float* group_scales, float* y) {
  if (const auto* t = dynamic_cast<const TiledTernary*>(&w))
    return ternary_gemm_f32(t->view(), x, act_scale, M, group_scales, y);
  return int8_gemm_f32(w, x, act_scale, M, group_scales, y);
}

void ternary_gemm_f32(const PackedTernary& w, const int8_t* x, const float* act_scale, int64_t M,
                      const uint16_t* group_scales_f16, float* y) {
  if (const auto* t = dynamic_cast<const TiledTernary*>(&w))
    return ternary_gemm_f32(t->view(), x, act_scale, M, group_scales_f16, y);
  const int64_t n = (w.rows() + 15) / 16 * 16 * w.groups();
  std::vector<float> gs(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) gs[static_cast<size_t>(i)] = f16_to_f32(group_scales_f16[i]);
  return int8_gemm_f32(w, x, act_scale, M, gs.data(), y);
}

}  // namespace tritium::cpu
