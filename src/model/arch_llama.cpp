// LlamaForCausalLM's decoder layer (transformers' modeling_llama.py): input_layernorm, self_attn.{q,k,v,o}_proj,
// post_attention_layernorm, mlp.{gate,up,down}_proj.
#include <fmt/format.h>

#include "model/arch.h"

namespace tritium {

LayerTensors llama_layer_tensors(const ModelConfig& c, int layer) {
  const std::string p = fmt::format("model.layers.{}.", layer);
  const int64_t H = c.hidden_size, I = c.intermediate_size, qd = c.q_dim(), kvd = c.kv_dim();
  LayerTensors t;
  t.input_norm = {p + "input_layernorm.weight", H};
  t.post_attn_norm = {p + "post_attention_layernorm.weight", H};
  t.qkv = {{{p + "self_attn.q_proj", qd}, {p + "self_attn.k_proj", kvd}, {p + "self_attn.v_proj", kvd}}, H, c.qkv_bias};
  t.o = {{{p + "self_attn.o_proj", H}}, qd, c.o_bias};
  t.gate_up = {{{p + "mlp.gate_proj", I}, {p + "mlp.up_proj", I}}, H, c.mlp_bias};
  t.down = {{{p + "mlp.down_proj", H}}, I, c.mlp_bias};
  return t;
}

}  // namespace tritium
