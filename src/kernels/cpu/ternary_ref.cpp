// Scalar reference (the oracle) for the tiled ternary formats: decodes every weight with plain scalar
// code straight from the documented byte layout (base-3 digits by division for tq1, a bit walk for bitcos),
// then sums w * x over the real K — no codes, no padding, no SIMD.
#include <algorithm>
#include <vector>

#include "core/parallel.h"
#include "kernels/cpu/ternary_kernels.h"

namespace tritium::cpu {

namespace detail {
namespace {
// Runs fn(tile, decoded tile int8 [16][kp]) over all tiles, in parallel.
template <class Fn>
void for_each_decoded_tile(const TernaryView& w, Fn&& fn) {
  parallel_for(w.tiles, 1, [&](int64_t t0, int64_t t1) {
    std::vector<int8_t> tile(static_cast<size_t>(16 * w.kp));
    for (int64_t t = t0; t < t1; ++t) {
      ternary_decode_tile(w, t, tile.data());
      fn(t, tile.data());
    }
  });
}
}  // namespace

void ternary_gemm_i32_ref(const TernaryView& w, const int8_t* x, int64_t M, int32_t* acc) {
  const int64_t N = w.n, K = w.k, kp = w.kp;
  for_each_decoded_tile(w, [&](int64_t t, const int8_t* tile) {
    for (int64_t r = 0; r < 16 && t * 16 + r < N; ++r) {
      const int8_t* wr = tile + r * kp;
      for (int64_t m = 0; m < M; ++m) {
        const int8_t* xr = x + m * K;
        int32_t s = 0;
        for (int64_t k = 0; k < K; ++k) s += static_cast<int32_t>(xr[k]) * wr[k];
        acc[m * N + t * 16 + r] = s;
      }
    }
  });
}

void ternary_gemm_f32_ref(const TernaryView& w, const int8_t* x, const float* act_scale, int64_t M,
                          const float* group_scales, float* y) {
  const int64_t N = w.n, K = w.k, kp = w.kp, G = (K + kTernaryGroupK - 1) / kTernaryGroupK;
  for_each_decoded_tile(w, [&](int64_t t, const int8_t* tile) {
    for (int64_t r = 0; r < 16 && t * 16 + r < N; ++r) {
      const int64_t n = t * 16 + r;
      const int8_t* wr = tile + r * kp;
      for (int64_t m = 0; m < M; ++m) {
        const int8_t* xr = x + m * K;
        float s = 0.0f;
        for (int64_t g = 0; g < G; ++g) {
          int32_t a = 0;
          for (int64_t k = g * kTernaryGroupK; k < std::min(K, (g + 1) * kTernaryGroupK); ++k) {
            a += static_cast<int32_t>(xr[k]) * wr[k];
          }
          s += group_scales[(t * G + g) * 16 + r] * static_cast<float>(a);
        }
        y[m * N + n] = act_scale[m] * s;
      }
    }
  });
}

}  // namespace detail
}  // namespace tritium::cpu
