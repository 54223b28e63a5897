// tritium parallel: partitioning a loaded Transformer into the shard of one tensor-parallel rank.
#pragma once

#include <memory>

#include "model/transformer.h"
#include "model/tp_plan.h"

namespace tritium {

/// The plan of `rank` in a group of `world` (see model/tp_plan.h for the split). Throws tritium::Error when
/// world < 1, rank outside [0, world), or world > num_kv_heads (a KV head is never split; there must be at least
/// one KV group per rank).
TensorParallelPlan make_tp_plan(const Transformer& full, int rank, int world);

/// Builds the shard of `rank`: a Transformer whose config has the rank's num_heads, num_kv_heads and
/// intermediate_size (hidden size and vocabulary stay full), whose q|k|v and gate|up hold the rank's output rows
/// (ternary weights repacked in their format, per-segment / per-group scales and biases sliced with them), o/down
/// split along K (float, rank 0 keeps any bias) or replicated (gather mode), lm_head holding the rank's vocabulary
/// rows, and the embedding shared with `full`. The shard carries the plan; a backend runs it with the collectives
/// (backend/cpu: a Communicator; backend/cuda: NCCL) and returns full logits.
/// int8 (LLM.int8() family) projections are column-parallel like the others; models with them run o/down in
/// gather mode (replicated), since per-token activation scales span the whole row.
std::unique_ptr<Transformer> shard_transformer(const Transformer& full, int rank, int world);

/// Copies rows of a projection: the rows of each range in order (ranges within the weight). Ternary segments
/// are re-derived from the ranges (each range must lie inside one segment; adjacent pieces of one segment merge).
std::unique_ptr<Linear> slice_linear_rows(const Linear& lin, const std::vector<Range>& ranges);
/// Copies columns [cols) of a float projection (row-parallel split); the bias is kept when keep_bias.
std::unique_ptr<Linear> slice_linear_cols(const Linear& lin, Range cols, bool keep_bias);

}  // namespace tritium
