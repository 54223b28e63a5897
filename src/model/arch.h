// tritium model: which tensors (Hugging Face names, shapes) make a decoder layer of each architecture. One file per
// architecture (arch_llama.cpp, arch_qwen2.cpp, arch_qwen3.cpp, arch_bitnet.cpp) says what it adds to Llama's layer;
// the builder (model/build_transformer.h) reads them from any WeightSource and model/projections.h picks their
// storage. A new architecture is a new file here and one case in layer_tensors().
//
// Shapes: a norm is [size]; a projection part is [rows, in] as in a Hugging Face Linear (out, in).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "io/model_config.h"

namespace tritium {

/// A norm's weight vector.
struct NormTensor {
  std::string name;
  int64_t size = 0;
};

/// One fused projection: its parts in output order (tensor prefix without ".weight", rows), the input size, and
/// whether every part has a bias ("<prefix>.bias" [rows]).
struct ProjectionTensors {
  std::vector<std::pair<std::string, int64_t>> parts;
  int64_t in = 0;
  bool bias = false;
};

/// The tensors of one decoder layer.
struct LayerTensors {
  NormTensor input_norm, post_attn_norm;
  std::optional<NormTensor> attn_sub_norm, ffn_sub_norm;  ///< BitNet: before o_proj and down_proj
  std::optional<NormTensor> q_norm, k_norm;               ///< Qwen3: per head, on q and k before RoPE
  ProjectionTensors qkv, o, gate_up, down;
};

/// The tensors outside the decoder layers (the same in the four architectures).
inline constexpr const char* kEmbedTokensName = "model.embed_tokens.weight";  ///< [vocab, hidden]
inline constexpr const char* kFinalNormName = "model.norm.weight";            ///< [hidden]
inline constexpr const char* kLmHeadName = "lm_head.weight";                  ///< [vocab, hidden]; absent when tied

/// LlamaForCausalLM (and Mistral, Falcon3): pre-norm attention and SwiGLU MLP; q/k/v and o biases with
/// attention_bias, MLP biases with mlp_bias (ModelConfig::qkv_bias, o_bias, mlp_bias).
LayerTensors llama_layer_tensors(const ModelConfig& c, int layer);
/// Qwen2ForCausalLM: Llama's layer with q/k/v biases.
LayerTensors qwen2_layer_tensors(const ModelConfig& c, int layer);
/// Qwen3ForCausalLM: Llama's layer with q_norm and k_norm [head_dim].
LayerTensors qwen3_layer_tensors(const ModelConfig& c, int layer);
/// BitNetForCausalLM (BitNet b1.58): Llama's layer with attn_sub_norm [q_dim] and ffn_sub_norm [intermediate].
LayerTensors bitnet_layer_tensors(const ModelConfig& c, int layer);

/// The layer tensors of c.arch.
LayerTensors layer_tensors(const ModelConfig& c, int layer);

}  // namespace tritium
