// Scalar reference (the oracle) for the tiled ternary formats: decodes every weight with plain scalar
// code straight from the documented byte layout (base-3 digits by division for tq1, a bit walk for bitcos),
// then sums w * x over the real K — no codes, no padding, no SIMD.
#include <algorithm>
#include <vector>

#include "core/parallel.h"
#include "kernels/cpu/ternary_kernels.h"
#include "quant/ternary_tq1.h"

namespace tritium::cpu {

void ternary_decode_tile_ref(const TernaryView& w, int64_t t, int8_t* out) {
  const int64_t kp = w.kp;
  switch (w.fmt) {
    case TernaryFormat::kI2: {
      const uint8_t* tile = w.codes + t * (kp / 16) * 64;
      for (int64_t r = 0; r < 16; ++r)
        for (int64_t k = 0; k < kp; ++k) {
          const int64_t b = k / 16, q = (k % 16) / 4, j = k % 4;
          const int code = (tile[b * 64 + 4 * r + j] >> (2 * q)) & 3;
          out[r * kp + k] = static_cast<int8_t>(code - 1);
        }
      return;
    }
    case TernaryFormat::kTQ1: {
      const int64_t G = kp / kTernaryGroupK;
      static constexpr int kPow3[5] = {81, 27, 9, 3, 1};
      for (int64_t r = 0; r < 16; ++r)
        for (int64_t k = 0; k < kp; ++k) {
          const uint8_t* blk = w.codes + (t * G + k / 128) * TernaryTQ1::kGroupBytes;
          const int64_t kk = k % 128, j = kk % 4;
          int code;
          if (kk < 120) {
            const int64_t s = kk / 20, q = (kk % 20) / 4;
            const int v = (blk[s * 64 + 4 * r + j] * 243) >> 8;  // inverse of ceil(v * 256 / 243)
            code = v / kPow3[q] % 3;
          } else {
            const int64_t q = (kk - 120) / 4, lane = 4 * r + j;
            const int shift = (lane >= 32 ? 4 : 0) + 2 * static_cast<int>(q);
            code = (blk[384 + lane % 32] >> shift) & 3;
          }
          out[r * kp + k] = static_cast<int8_t>(code - 1);
        }
      return;
    }
    case TernaryFormat::kBitcos: {
      const int64_t steps = kp / 4;
      uint64_t pos = w.sign_offsets[t];
      for (int64_t s = 0; s < steps; ++s) {
        const uint64_t word = w.bitmap[t * steps + s];
        for (int64_t i = 0; i < 64; ++i) {
          int8_t v = 0;
          if ((word >> i) & 1) {
            v = ((w.signs[pos / 64] >> (pos % 64)) & 1) ? -1 : 1;
            ++pos;
          }
          out[(i / 4) * kp + 4 * s + i % 4] = v;
        }
      }
      return;
    }
    case TernaryFormat::kInt8: break;
  }
}

namespace detail {
namespace {
// Runs fn(tile, decoded tile int8 [16][kp]) over all tiles, in parallel.
template <class Fn>
void for_each_decoded_tile(const TernaryView& w, Fn&& fn) {
  parallel_for(w.tiles, 1, [&](int64_t t0, int64_t t1) {
    std::vector<int8_t> tile(static_cast<size_t>(16 * w.kp));
    for (int64_t t = t0; t < t1; ++t) {
      ternary_decode_tile_ref(w, t, tile.data());
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
          s += group_scales[n * G + g] * static_cast<float>(a);
        }
        y[m * N + n] = act_scale[m] * s;
      }
    }
  });
}

}  // namespace detail
}  // namespace tritium::cpu
