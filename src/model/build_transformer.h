// tritium model: one builder for every weight source (model/weight_source.h) and architecture (model/arch.h).
#pragma once

#include <memory>

#include "io/model_config.h"
#include "model/load_options.h"
#include "model/transformer.h"
#include "model/weight_source.h"

namespace tritium {

/// Builds the Transformer of config `c` from `ws` (options already validated by load_transformer): each layer's
/// tensors as layer_tensors(c, l) names them, projections fused and stored as model/projections.h decides (ternary
/// ones packed in opts.ternary_format when c.bitnet_quant); the head tied to the embeddings when
/// c.tie_word_embeddings or lm_head.weight is absent, in the format resolve_lm_head_kind(opts.lm_head) names, or
/// packed ternary with group scales when it is ternary (model/lm_head.h). Tables that `ws` lends from a mapped file
/// (bf16 embedding, bf16 head, Q2_0 tables) stay borrowed: the caller keeps the file alive
/// (Transformer::set_keep_alive). Throws tritium::Error for --quant on a ternary model and whatever `ws` throws.
std::unique_ptr<Transformer> build_transformer(ModelConfig c, const WeightSource& ws, const LoadOptions& opts);

}  // namespace tritium
