// tritium model: a GGUF file's weights (llama.cpp, bitnet.cpp, ik_llama.cpp) as a WeightSource
// (model/weight_source.h): the tensors under their Hugging Face names, so a GGUF model and the safetensors folder it
// came from build into the same Transformer. The configuration comes from model/gguf_config.h.
//
// Tensors: token_embd, output_norm, output (absent: tied to token_embd), blk.N.{attn_norm, attn_q, attn_k, attn_v,
// attn_output, attn_sub_norm, attn_q_norm, attn_k_norm, ffn_norm, ffn_gate, ffn_up, ffn_down, ffn_sub_norm}.weight, and .bias where present
// (q/k/v biases make qkv_bias, attn_output.bias o_bias, ffn biases mlp_bias), and for BitNet projections an optional
// one-value blk.N.<projection>.scale that multiplies the output (llama.cpp's wq_scale, ...). ne is [in, out], the
// transpose of Hugging Face's [out, in] shape, so a row of the GGUF data is a row of the Hugging Face matrix. A file
// with any other tensor (rope_freqs, ...) is refused: it holds something the model would silently leave out.
// RoPE: bitnet and qwen2 files keep Hugging Face's rotate-half layout (llama.cpp runs NEOX RoPE on them); llama
// files have the q/k rows of each head permuted for llama.cpp's interleaved RoPE (its converter's permute()),
// which the loader undoes.
// Types: BitNet projections of type TQ1_0 / TQ2_0 / I2_S are ternary values with their scale (TQ block scales that
// differ become per-group scales); float projections (F16, BF16, F32, Q8_0) that are ternary x one magnitude are
// taken exactly, others quantized by BitNet's absmean rule. Llama / Qwen2 / Qwen3 tensors of any supported type are
// dequantized to float32 (so --quant applies as for safetensors), except Q2_0 ones: ternary codes with their block
// scales straight from the blocks (stored_ternary), tables kept in their blocks (docs/formats.md, "GGUF Q2_0").
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "io/gguf.h"
#include "io/model_config.h"
#include "model/weight_source.h"

namespace tritium {

class GgufSource : public WeightSource {
 public:
  /// The weights of `f` (which must outlive the source) for the model of config `c` (from gguf_model_config(f)).
  static std::unique_ptr<GgufSource> open(const GgufFile& f, const ModelConfig& c);
  /// Tensors of the file that no getter asked for (after building: what the model would leave out).
  virtual std::vector<std::string> unused() const = 0;
};

/// The GGUF name of a Hugging Face tensor name ("model.layers.3.mlp.up_proj.weight" -> "blk.3.ffn_up.weight").
/// Throws tritium::Error for a name with no GGUF counterpart.
std::string gguf_tensor_name(const std::string& hf_name);

}  // namespace tritium
