// tritium model: where a checkpoint's tensors come from, asked for by their Hugging Face names, so that one
// builder (model/build_transformer.h) makes the same Transformer — the same fused projections, the same storage
// formats, the same --quant and --lm-head paths — from a safetensors folder (model/source_safetensors.h) and from a
// GGUF file (model/source_gguf.h).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "model/embedding.h"
#include "quant/ternary_ptq.h"

namespace tritium {

/// A BitNet projection as ternary values and the scale(s) they are multiplied by.
struct TernaryWeight {
  std::vector<int8_t> w;            ///< [out, in], each in {-1, 0, 1}
  float scale = 1.0f;               ///< multiplier of every output (when group_scales is empty)
  std::vector<float> group_scales;  ///< else [out, ceil(in / 128)]: a multiplier per row and group of 128 inputs
};

/// The tensors of one checkpoint. Names are Hugging Face's ("model.layers.0.self_attn.q_proj.weight");
/// shapes are [rows, cols] as in a Hugging Face Linear. Every getter throws tritium::Error naming the file and the
/// tensor (as the file names it) when it is missing or has another shape or an unusable type.
class WeightSource {
 public:
  virtual ~WeightSource() = default;
  virtual bool has(const std::string& name) const = 0;
  /// A float vector of n values (norm weights, biases).
  virtual std::vector<float> vec(const std::string& name, int64_t n) const = 0;
  /// A float matrix [rows, cols], row-major.
  virtual std::vector<float> mat(const std::string& name, int64_t rows, int64_t cols) const = 0;
  /// A table [rows, cols] (the embedding, an untied head) as held without conversion where the source allows:
  /// bf16 borrowed from the mapped file, else float32 (the default: mat()).
  virtual Embedding table(const std::string& name, int64_t rows, int64_t cols) const {
    return Embedding::f32(std::make_shared<const std::vector<float>>(mat(name, rows, cols)), rows, cols);
  }
  /// The BitNet projection `prefix` (e.g. "model.layers.0.mlp.up_proj") [out, in] as ternary values and scale.
  virtual TernaryWeight ternary(const std::string& prefix, int64_t out, int64_t in) const = 0;
  /// A 16/32-bit model's matrix [rows, cols] as ternary values and scales straight from a storage that holds them
  /// so (GGUF Q2_0): exactly what detect_ternary (quant/ternary_detect.h, groups of 128) finds in mat()'s values,
  /// without the float32 copy. nullopt where the source has no such storage or the values are not of that form
  /// (the caller then reads mat()).
  virtual std::optional<TernaryQuant> stored_ternary(const std::string& name, int64_t rows, int64_t cols) const {
    (void)name, (void)rows, (void)cols;
    return std::nullopt;
  }
};

/// BitNet b1.58's absmean rule for full-precision weights: scale = max(mean |W|, 1e-5), w = clamp(round(W / scale),
/// -1, 1) (round half to even).
TernaryWeight ternary_absmean_b158(const std::vector<float>& f);

}  // namespace tritium
