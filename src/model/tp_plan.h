// tritium model: the tensor-parallel plan of one rank (Megatron-LM style tensor parallelism).
//
// A model of H heads in G KV groups, intermediate size I and vocabulary V is split over `world` ranks:
//  - KV groups (each KV head with its num_heads / num_kv_heads query heads) are dealt out as contiguous,
//    balanced ranges (5 groups over 2 ranks: 2 + 3), so every rank's attention is self-contained;
//  - the MLP intermediate dimension and the vocabulary are split into balanced contiguous ranges;
//  - q|k|v and gate|up are column-parallel (the rank keeps the output rows of its heads / its slice);
//  - o_proj and down_proj are row-parallel (split along K, partial sums all-reduced) for float projections
//    without BitNet sub-norms; otherwise (BitNet: the sub-norm and the int8 absmax of the activations span the
//    full row) the input is all-gathered and o/down run replicated, which keeps TP bit-identical to TP=1;
//  - lm_head is vocabulary-parallel: each rank computes the logits of its vocabulary slice, then all-gather.
//  - the embedding is vocabulary-parallel: a rank looks up only the tokens of its vocabulary slice (zeros for the
//    others) and an all-reduce sums the rows; the GPU backend keeps only that slice in device memory.
#pragma once

#include <cstdint>
#include <vector>

namespace tritium {

/// A half-open range [begin, end).
struct Range {
  int64_t begin = 0, end = 0;
  int64_t size() const { return end - begin; }
};

/// Balanced contiguous split of n items into `parts` ranges: part r = [r*n/parts, (r+1)*n/parts) (sizes differ
/// by at most one; the later parts get the extra items).
inline Range split_range(int64_t n, int parts, int r) { return {r * n / parts, (r + 1) * n / parts}; }

struct TensorParallelPlan {
  int rank = 0, world = 1;
  /// o/down replicated after an all-gather of their input (true) or row-parallel with an all-reduce (false).
  bool gather_mode = false;
  int64_t hidden = 0;            ///< full hidden size
  int64_t q_dim_full = 0;        ///< full num_heads * head_dim
  int64_t inter_full = 0;        ///< full intermediate size
  int64_t vocab = 0;             ///< full vocabulary
  std::vector<int64_t> q_cols;   ///< per rank: its q_dim (attention output width)
  std::vector<int64_t> i_cols;   ///< per rank: its intermediate width
  std::vector<int64_t> v_rows;   ///< per rank: its vocabulary rows
  static int64_t max_of(const std::vector<int64_t>& v) {
    int64_t m = 0;
    for (int64_t x : v) m = x > m ? x : m;
    return m;
  }
};

}  // namespace tritium
