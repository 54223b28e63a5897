// Qwen2ForCausalLM's decoder layer (transformers' modeling_qwen2.py): Llama's, with biases on q_proj, k_proj and
// v_proj (not on o_proj).
#include "model/arch.h"

namespace tritium {

LayerTensors qwen2_layer_tensors(const ModelConfig& c, int layer) {
  LayerTensors t = llama_layer_tensors(c, layer);
  t.qkv.bias = true;
  t.o.bias = false;
  return t;
}

}  // namespace tritium
