// tritium kernels/cpu: causal multi-head attention with grouped-query heads over a gathered KV context.
#pragma once

#include <cstdint>

namespace tritium::cpu {

/// Scaled dot-product attention for the T new query tokens of one sequence (GQA, causal).
/// q: [T, H * D] (query row t sits at position start_pos + t); k, v: [ctx, KVH * D] for positions 0..ctx-1
/// (ctx >= start_pos + T); out: [T, H * D]. Query head h reads KV head h / (H / KVH).
/// Each output row is computed over exactly positions 0..start_pos+t in a fixed order, so the result for a
/// token does not depend on how its sequence was chunked or batched. Multithreaded over (head, token).
void attention_causal(const float* q, const float* k, const float* v, float* out, int64_t T, int64_t start_pos,
                      int H, int KVH, int D);

namespace detail {
/// One query row: scores over n positions, softmax, weighted sum of V. scores: scratch [n].
void attention_row_ref(const float* q, const float* k, const float* v, float* out, float* scores, int64_t n,
                       int64_t kv_stride, int D, float scale);
void attention_row_avx2(const float* q, const float* k, const float* v, float* out, float* scores, int64_t n,
                        int64_t kv_stride, int D, float scale);
/// Up to kMaxRows query rows q[j] (j < J) over the same n positions of one KV head, out[j] each bit for bit
/// attention_row_avx2's result; scores: scratch [J][ld], ld >= n. D a multiple of 8. The avx512 variant (AVX-512VL
/// CPUs) keeps more chains in registers, with the same bits (attention_rows.h).
inline constexpr int kAttentionMaxRows = 8;
void attention_rows_avx2(int J, const float* const* q, float* const* out, float* scores, int64_t ld, const float* k,
                         const float* v, int64_t n, int64_t kv_stride, int D, float scale);
void attention_rows_avx512(int J, const float* const* q, float* const* out, float* scores, int64_t ld,
                           const float* k, const float* v, int64_t n, int64_t kv_stride, int D, float scale);
}  // namespace detail

}  // namespace tritium::cpu
