// tritium model: loading a model from what a user points at. A folder is a Hugging Face model (config.json +
// safetensors: model/source_safetensors.h) or a tritium container (model/tritium_model.h); a regular file is GGUF
// (model/source_gguf.h). Each source hands its tensors under Hugging Face names to one builder
// (model/build_transformer.h), which asks the architecture's file (model/arch.h) for the layer's tensors and lets
// model/projections.h decide each projection's storage.
#pragma once

#include <memory>
#include <string>

#include "model/load_options.h"
#include "model/lm_head.h"
#include "model/transformer.h"

namespace tritium {

/// Loads a model folder, a tritium model or a GGUF file (a regular file: model/source_gguf.h). BitNet (quant_method
/// bitnet): projections as packed uint8 [out/4, in] (code = w + 1, rows r, r+out/4, r+2out/4, r+3out/4 in bits 0-1,
/// 2-3, 4-5, 6-7) with weight_scale (bf16 [1]) applied as a multiplier (autobitlinear) or divisor (bitlinear); or
/// unpacked bf16/fp16/f32 ternary values; a float weight that is not ternary is quantized by absmean (BitNet
/// b1.58). Llama / Qwen2 / Qwen3: bf16/fp16/f32 projections.
/// Throws tritium::Error naming the file and tensor for missing weights, wrong shapes or dtypes.
std::unique_ptr<Transformer> load_transformer(const std::string& path, const LoadOptions& opts = {});

}  // namespace tritium
