// tritium model: a GGUF file's model configuration, from its `<arch>.*` metadata (ggml's docs/gguf.md; the keys
// llama.cpp, bitnet.cpp and ik_llama.cpp write).
//
// Architectures (general.architecture): bitnet-b1.58 (bitnet.cpp), bitnet-25 (ik_llama.cpp) and bitnet (llama.cpp)
// are BitNet b1.58 (ternary projections, int8 activations, sub-norms); llama; qwen2; qwen3 (q_norm / k_norm).
// Keys (<a> = the architecture): <a>.block_count, .embedding_length, .feed_forward_length, .attention.head_count,
// .attention.head_count_kv (default head_count; a per-layer array must be constant), .attention.key_length /
// .value_length (default embedding_length / head_count), .attention.layer_norm_rms_epsilon, .rope.freq_base
// (default 10000), .rope.dimension_count (must be the head size: no partial RoPE), .rope.scaling.type (none, or
// linear with .rope.scaling.factor 1), .context_length (default 2048), .vocab_size (must match token_embd),
// .hidden_activation ("relu2" or "silu"; default relu2 for bitnet-b1.58 / bitnet-25, whose models use it, silu
// otherwise, as llama.cpp's bitnet graph); tokenizer.ggml.bos_token_id, and eos / eot / eom_token_id as end tokens.
#pragma once

#include <string>

#include "io/gguf.h"
#include "io/model_config.h"

namespace tritium {

/// Whether load_transformer treats `path` as a GGUF file: a regular file (a folder is a Hugging Face or tritium
/// model). Whether it really is GGUF is checked when it is opened.
bool is_gguf_path(const std::string& path);

/// The model configuration of a GGUF file (model_dir = its path). Throws tritium::Error naming the file and key for
/// a missing or malformed key, an unsupported architecture, activation or RoPE scaling, inconsistent sizes.
ModelConfig gguf_model_config(const GgufFile& f);

}  // namespace tritium
