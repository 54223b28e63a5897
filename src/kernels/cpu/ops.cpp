#include "kernels/cpu/ops.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "core/parallel.h"
#include "kernels/cpu/dispatch.h"

namespace tritium::cpu {

// quantize_avx2.cpp, quantize_avx512.cpp
void quantize_row_absmax_i8_avx2(const float* xr, int64_t K, int8_t* qr, float* inv_scale);
void quantize_row_absmax_i8_avx512(const float* xr, int64_t K, int8_t* qr, float* inv_scale);

namespace {
// One RMSNorm row: the sum of squares in double, in increasing d.
inline void rms_norm_row(const float* xr, const float* weight, float* yr, int64_t D, float eps) {
  double ss = 0.0;
  for (int64_t d = 0; d < D; ++d) ss += static_cast<double>(xr[d]) * xr[d];
  const float inv = 1.0f / std::sqrt(static_cast<float>(ss / static_cast<double>(D)) + eps);
  for (int64_t d = 0; d < D; ++d) yr[d] = weight[d] * (xr[d] * inv);
}
}  // namespace

void head_rms_norm(float* x, int64_t M, int64_t stride, int64_t heads, int64_t D, const float* weight, float eps) {
  auto rows = [&](int64_t m0, int64_t m1) {
    for (int64_t m = m0; m < m1; ++m)
      for (int64_t h = 0; h < heads; ++h) rms_norm_row(x + m * stride + h * D, weight, x + m * stride + h * D, D, eps);
  };
  if (M >= 16) parallel_for(M, 4, rows);
  else rows(0, M);
}

void rms_norm(const float* x, const float* weight, float* y, int64_t M, int64_t D, float eps) {
  auto rows = [&](int64_t m0, int64_t m1) {
    for (int64_t m = m0; m < m1; ++m) rms_norm_row(x + m * D, weight, y + m * D, D, eps);
  };
  // Prefill rows over the threads (each row's sum keeps its order: the same bits); a decode step's few rows are
  // cheaper than waking the pool.
  if (M >= 16) parallel_for(M, 4, rows);
  else rows(0, M);
}

void rope_apply(float* x, int n_heads, int head_dim, const float* cos, const float* sin) {
  const int half = head_dim / 2;
  for (int h = 0; h < n_heads; ++h) {
    float* v = x + h * head_dim;
    for (int i = 0; i < half; ++i) {
      const float a = v[i], b = v[i + half];
      v[i] = a * cos[i] - b * sin[i];
      v[i + half] = b * cos[i] + a * sin[i];
    }
  }
}

void silu_mul(const float* gate, const float* up, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    y[i] = (g / (1.0f + std::exp(-g))) * up[i];
  }
}

void relu2_mul(const float* gate, const float* up, float* y, int64_t n) {
  // maxps(g, 0) is g > 0 ? g : 0 exactly (NaN and -0 give +0): the same values as the scalar tail, without the
  // data-dependent branch the compiler makes of the scalar form (mispredicted on about half of the elements).
  const __m128 zero = _mm_setzero_ps();
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const __m128 r = _mm_max_ps(_mm_loadu_ps(gate + i), zero);
    _mm_storeu_ps(y + i, _mm_mul_ps(_mm_mul_ps(r, r), _mm_loadu_ps(up + i)));
  }
  for (; i < n; ++i) {
    const float r = gate[i] > 0.0f ? gate[i] : 0.0f;
    y[i] = (r * r) * up[i];
  }
}

void softmax(float* x, int64_t n) {
  if (n <= 0) return;
  float mx = x[0];
  for (int64_t i = 1; i < n; ++i) mx = std::max(mx, x[i]);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - mx);
    sum += x[i];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

void add_inplace(float* y, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

void quantize_rows_absmax_i8(const float* x, int64_t M, int64_t K, int8_t* q, float* inv_scale) {
  const KernelPath path = cpu_kernel_path();
  const bool avx512 = has_avx512(path), avx2 = path == KernelPath::kAvx2;
  auto rows = [&](int64_t m0, int64_t m1) {
    for (int64_t m = m0; m < m1; ++m) {
      const float* xr = x + m * K;
      int8_t* qr = q + m * K;
      if (avx512) {
        quantize_row_absmax_i8_avx512(xr, K, qr, inv_scale + m);
        continue;
      }
      if (avx2) {
        quantize_row_absmax_i8_avx2(xr, K, qr, inv_scale + m);
        continue;
      }
      float amax = 0.0f;
      for (int64_t k = 0; k < K; ++k) amax = std::max(amax, std::fabs(xr[k]));
      const float s = 127.0f / std::max(amax, 1e-5f);
      for (int64_t k = 0; k < K; ++k) {
        const float r = std::nearbyint(xr[k] * s);
        qr[k] = static_cast<int8_t>(std::clamp(r, -128.0f, 127.0f));
      }
      inv_scale[m] = 1.0f / s;
    }
  };
  // Rows are independent; split them over threads only when there are enough of them to pay for it.
  if (M >= 8) parallel_for(M, 4, rows);
  else rows(0, M);
}

}  // namespace tritium::cpu
