// tritium model: a GGUF file (llama.cpp, bitnet.cpp, ik_llama.cpp) as a model: the configuration from the
// `<arch>.*` metadata, the weights from its tensors, handed to build_transformer under Hugging Face names, so a
// GGUF model and the safetensors folder it came from load into the same Transformer.
//
// Architectures (general.architecture): bitnet-b1.58 (bitnet.cpp), bitnet-25 (ik_llama.cpp) and bitnet (llama.cpp)
// are BitNet b1.58 (ternary projections, int8 activations, sub-norms); llama; qwen2.
// Keys (<a> = the architecture): <a>.block_count, .embedding_length, .feed_forward_length, .attention.head_count,
// .attention.head_count_kv (default head_count; a per-layer array must be constant), .attention.key_length /
// .value_length (default embedding_length / head_count), .attention.layer_norm_rms_epsilon, .rope.freq_base
// (default 10000), .rope.dimension_count (must be the head size: no partial RoPE), .rope.scaling.type (none, or
// linear with .rope.scaling.factor 1), .context_length (default 2048), .vocab_size (must match token_embd),
// .hidden_activation ("relu2" or "silu"; default relu2 for bitnet-b1.58 / bitnet-25, whose models use it, silu
// otherwise, as llama.cpp's bitnet graph); tokenizer.ggml.bos_token_id, and eos / eot / eom_token_id as end tokens.
// Tensors: token_embd, output_norm, output (absent: tied to token_embd), blk.N.{attn_norm, attn_q, attn_k, attn_v,
// attn_output, attn_sub_norm, ffn_norm, ffn_gate, ffn_up, ffn_down, ffn_sub_norm}.weight, and .bias where present
// (q/k/v biases make qkv_bias, attn_output.bias o_bias, ffn biases mlp_bias), and for BitNet projections an optional
// one-value blk.N.<projection>.scale that multiplies the output (llama.cpp's wq_scale, ...). ne is [in, out], the
// transpose of Hugging Face's [out, in] shape, so a row of the GGUF data is a row of the Hugging Face matrix. A file
// with any other tensor (rope_freqs, ...) is refused: it holds something the model would silently leave out.
// RoPE: bitnet and qwen2 files keep Hugging Face's rotate-half layout (llama.cpp runs NEOX RoPE on them); llama
// files have the q/k rows of each head permuted for llama.cpp's interleaved RoPE (its converter's permute()),
// which the loader undoes.
// Types: BitNet projections of type TQ1_0 / TQ2_0 / I2_S are ternary values with their scale (TQ block scales that
// differ become per-group scales); float projections (F16, BF16, F32, Q8_0) that are ternary x one magnitude are
// taken exactly, others quantized by BitNet's absmean rule. Llama / Qwen2 tensors of any supported type are
// dequantized to float32 (so --quant applies as for safetensors).
#pragma once

#include <memory>
#include <string>

#include "io/gguf.h"
#include "io/model_config.h"
#include "model/loader.h"
#include "model/transformer.h"

namespace tritium {

/// Whether load_transformer treats `path` as a GGUF file: a regular file (a folder is a Hugging Face or tritium
/// model). Whether it really is GGUF is checked when it is opened.
bool is_gguf_path(const std::string& path);

/// The model configuration of a GGUF file (model_dir = its path). Throws tritium::Error naming the file and key for
/// a missing or malformed key, an unsupported architecture, activation or RoPE scaling, inconsistent sizes.
ModelConfig gguf_model_config(const GgufFile& f);

/// Loads a GGUF model (the file is closed afterwards: every weight is repacked or converted).
std::unique_ptr<Transformer> load_gguf_transformer(const std::string& path, const LoadOptions& opts);

/// The GGUF name of a Hugging Face tensor name ("model.layers.3.mlp.up_proj.weight" -> "blk.3.ffn_up.weight").
/// Throws tritium::Error for a name with no GGUF counterpart.
std::string gguf_tensor_name(const std::string& hf_name);

}  // namespace tritium
