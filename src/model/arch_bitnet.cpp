// BitNetForCausalLM's decoder layer (BitNet b1.58 2B4T; transformers' modeling_bitnet.py): Llama's, plus an RMSNorm
// on the attention output before o_proj (self_attn.attn_sub_norm [q_dim]) and on the MLP's gated activation before
// down_proj (mlp.ffn_sub_norm [intermediate]). The projections are ternary (ModelConfig::bitnet_quant).
#include <fmt/format.h>

#include "model/arch.h"

namespace tritium {

LayerTensors bitnet_layer_tensors(const ModelConfig& c, int layer) {
  LayerTensors t = llama_layer_tensors(c, layer);
  const std::string p = fmt::format("model.layers.{}.", layer);
  t.attn_sub_norm = NormTensor{p + "self_attn.attn_sub_norm.weight", c.q_dim()};
  t.ffn_sub_norm = NormTensor{p + "mlp.ffn_sub_norm.weight", c.intermediate_size};
  return t;
}

}  // namespace tritium
