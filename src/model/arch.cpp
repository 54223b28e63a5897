#include "model/arch.h"

namespace tritium {

LayerTensors layer_tensors(const ModelConfig& c, int layer) {
  switch (c.arch) {
    case Arch::kLlama: return llama_layer_tensors(c, layer);
    case Arch::kQwen2: return qwen2_layer_tensors(c, layer);
    case Arch::kQwen3: return qwen3_layer_tensors(c, layer);
    case Arch::kBitNet: return bitnet_layer_tensors(c, layer);
  }
  return llama_layer_tensors(c, layer);
}

}  // namespace tritium
