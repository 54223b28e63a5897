// Qwen3ForCausalLM's decoder layer (transformers' modeling_qwen3.py): Llama's without biases, plus an RMSNorm over
// each head of q (self_attn.q_norm) and of k (self_attn.k_norm), weights [head_dim], applied before RoPE. head_dim
// is explicit in Qwen3's config (128 for every size), so q_dim need not equal hidden_size.
#include <fmt/format.h>

#include "model/arch.h"

namespace tritium {

LayerTensors qwen3_layer_tensors(const ModelConfig& c, int layer) {
  LayerTensors t = llama_layer_tensors(c, layer);
  const std::string p = fmt::format("model.layers.{}.self_attn.", layer);
  t.q_norm = NormTensor{p + "q_norm.weight", c.head_dim};
  t.k_norm = NormTensor{p + "k_norm.weight", c.head_dim};
  return t;
}

}  // namespace tritium
