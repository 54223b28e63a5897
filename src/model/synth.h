// tritium model: synthetic checkpoints with real shapes and random ternary weights, for benchmarks: BitNet folders
// (safetensors, as microsoft/bitnet-b1.58-2B-4T ships) and Ternary Bonsai-shaped Qwen3 GGUF files.
#pragma once

#include <cstdint>
#include <string>

#include "io/model_config.h"

namespace tritium {

struct SynthOptions {
  /// "bitnet-2b4t" (microsoft/bitnet-b1.58-2B-4T), "qwen2-1.5b", "tiny", "micro": BitNet folders;
  /// "qwen3-1.7b", "qwen3-8b" (Ternary Bonsai 1.7B / 8B, i.e. Qwen3-1.7B / 8B sizes), "qwen3-micro": GGUF files.
  std::string shape = "bitnet-2b4t";
  double zero_density = 0.42;          ///< fraction of zero ternary weights, in [0, 1]
  uint64_t seed = 1;
  int num_layers = 0;                  ///< decoder layers; 0 = the shape's own count
  int intermediate_size = 0;           ///< MLP width (a multiple of 4); 0 = the shape's own (tests of padded widths)
  std::string tokenizer_dir;           ///< folder with tokenizer.json (+ tokenizer_config.json) to copy; "" = none
  /// GGUF shapes: "q2_0" (every projection, the embedding and an untied head in ggml type 42) or "f16" (the same
  /// weights in F16: the input llama.cpp-family quantizers take).
  std::string gguf_type = "q2_0";
  int q2_block = 128;                  ///< Q2_0 layout: 128 (PrismML's 34-byte blocks, as published) or 64 (mainline)
};

/// Whether `shape` names a GGUF shape (write_synthetic_qwen3_gguf).
bool synth_shape_is_gguf(const std::string& shape);

/// Model sizes of a named shape. Throws tritium::Error for an unknown name.
ModelConfig synth_shape(const std::string& name);

/// Writes a Hugging Face-layout BitNetForCausalLM folder: config.json (quant_method bitnet, autobitlinear),
/// generation_config.json, model.safetensors with packed uint8 [out/4, in] projections (code = w + 1, the
/// microsoft/bitnet-b1.58-2B-4T layout) whose ternary values are i.i.d. with P(0) = zero_density, bf16 weight_scale,
/// bf16 norms (ones) and bf16 embeddings (uniform, std 0.02), and the tokenizer files. Throws tritium::Error on
/// a bad zero density, an unknown shape or an I/O failure.
void write_synthetic_bitnet(const std::string& out_dir, const SynthOptions& opts);

/// Writes a Ternary Bonsai-shaped Qwen3 GGUF file (architecture qwen3): every projection, the token embedding and
/// (for untied shapes) the output head are ternary with one scale per row and group of 128 inputs (fp16, around
/// 1/sqrt(in); the embedding's around 0.02), i.i.d. values with P(0) = zero_density; F32 norms (ones); Qwen3's
/// sizes, RoPE theta 1e6, RMSNorm eps 1e-6; the tokenizer metadata (tokenizer.ggml.*, pre-tokenizer "qwen2") and
/// chat template from opts.tokenizer_dir's tokenizer.json / tokenizer_config.json (required). The same seed gives
/// the same weights in both gguf_types. Throws tritium::Error on bad options or an I/O failure.
void write_synthetic_qwen3_gguf(const std::string& out_path, const SynthOptions& opts);

}  // namespace tritium
