#include "kernels/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/parallel.h"
#include "core/scratch.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/ops.h"

namespace tritium::cpu {
namespace detail {

void attention_row_ref(const float* q, const float* k, const float* v, float* out, float* scores, int64_t n,
                       int64_t kv_stride, int D, float scale) {
  for (int64_t p = 0; p < n; ++p) {
    const float* kp = k + p * kv_stride;
    float s = 0.0f;
    for (int d = 0; d < D; ++d) s += q[d] * kp[d];
    scores[p] = s * scale;
  }
  softmax(scores, n);
  std::memset(out, 0, sizeof(float) * D);
  for (int64_t p = 0; p < n; ++p) {
    const float w = scores[p];
    const float* vp = v + p * kv_stride;
    for (int d = 0; d < D; ++d) out[d] += w * vp[d];
  }
}

}  // namespace detail

void attention_causal(const float* q, const float* k, const float* v, float* out, int64_t T, int64_t start_pos,
                      int H, int KVH, int D) {
  const int group = H / KVH;
  const int64_t qstride = static_cast<int64_t>(H) * D, kvstride = static_cast<int64_t>(KVH) * D;
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  const KernelPath path = cpu_kernel_path();
  const bool avx2 = path != KernelPath::kRef && D % 8 == 0;
  const auto rows = has_avx512(path) ? &detail::attention_rows_avx512 : &detail::attention_rows_avx2;
  if (avx2) {
    // The query heads of one KV head at one token together (same K, V and positions), up to
    // kAttentionMaxRows at a time; each row's result is the one-row kernel's.
    const int chunks = (group + detail::kAttentionMaxRows - 1) / detail::kAttentionMaxRows;
    parallel_for(static_cast<int64_t>(KVH) * chunks * T, 1, [&](int64_t b, int64_t e) {
      const int64_t ld = start_pos + T;
      thread_local Scratch<float> scores_buf;
      float* scores = scores_buf.get(static_cast<size_t>(detail::kAttentionMaxRows * ld));
      const float* qs[detail::kAttentionMaxRows];
      float* os[detail::kAttentionMaxRows];
      for (int64_t idx = b; idx < e; ++idx) {
        const int64_t gc = idx / T, t = idx % T;
        const int g = static_cast<int>(gc / chunks), c = static_cast<int>(gc % chunks);
        const int h0 = g * group + c * detail::kAttentionMaxRows;
        const int J = std::min(detail::kAttentionMaxRows, (g + 1) * group - h0);
        for (int j = 0; j < J; ++j) {
          qs[j] = q + t * qstride + static_cast<int64_t>(h0 + j) * D;
          os[j] = out + t * qstride + static_cast<int64_t>(h0 + j) * D;
        }
        const int64_t kvoff = static_cast<int64_t>(g) * D;
        rows(J, qs, os, scores, ld, k + kvoff, v + kvoff, start_pos + t + 1, kvstride, D, scale);
      }
    });
    return;
  }
  parallel_for(static_cast<int64_t>(H) * T, 1, [&](int64_t b, int64_t e) {
    thread_local Scratch<float> scores_buf;
    float* scores = scores_buf.get(static_cast<size_t>(start_pos + T));
    for (int64_t idx = b; idx < e; ++idx) {
      const int h = static_cast<int>(idx / T);
      const int64_t t = idx % T;
      const int64_t kvoff = static_cast<int64_t>(h / group) * D;
      const float* qr = q + t * qstride + static_cast<int64_t>(h) * D;
      float* o = out + t * qstride + static_cast<int64_t>(h) * D;
      const int64_t n = start_pos + t + 1;
      if (avx2) detail::attention_row_avx2(qr, k + kvoff, v + kvoff, o, scores, n, kvstride, D, scale);
      else detail::attention_row_ref(qr, k + kvoff, v + kvoff, o, scores, n, kvstride, D, scale);
    }
  });
}

}  // namespace tritium::cpu
