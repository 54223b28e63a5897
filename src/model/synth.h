// tritium model: synthetic BitNet checkpoints with real shapes and random ternary weights, for benchmarks.
#pragma once

#include <cstdint>
#include <string>

#include "io/model_config.h"

namespace tritium {

struct SynthOptions {
  std::string shape = "bitnet-2b4t";  ///< "bitnet-2b4t" (microsoft/bitnet-b1.58-2B-4T) or "tiny" (tiny-bitnet sizes)
  double zero_density = 0.42;          ///< fraction of zero ternary weights, in [0, 1]
  uint64_t seed = 1;
  int num_layers = 0;                  ///< decoder layers; 0 = the shape's own count
  int intermediate_size = 0;           ///< MLP width (a multiple of 4); 0 = the shape's own (tests of padded widths)
  std::string tokenizer_dir;           ///< folder with tokenizer.json (+ tokenizer_config.json) to copy; "" = none
};

/// Model sizes of a named shape. Throws tritium::Error for an unknown name.
ModelConfig synth_shape(const std::string& name);

/// Writes a Hugging Face-layout BitNetForCausalLM folder: config.json (quant_method bitnet, autobitlinear),
/// generation_config.json, model.safetensors with packed uint8 [out/4, in] projections (code = w + 1, the
/// microsoft/bitnet-b1.58-2B-4T layout) whose ternary values are i.i.d. with P(0) = zero_density, bf16 weight_scale,
/// bf16 norms (ones) and bf16 embeddings (uniform, std 0.02), and the tokenizer files. Throws tritium::Error on
/// a bad zero density, an unknown shape or an I/O failure.
void write_synthetic_bitnet(const std::string& out_dir, const SynthOptions& opts);

}  // namespace tritium
