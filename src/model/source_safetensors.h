// tritium model: a Hugging Face folder's safetensors weights as a WeightSource (model/weight_source.h).
//
// Float tensors (F32, BF16, F16) are read as float32; a bf16 table (embedding, untied head) is lent from the mapped
// file. BitNet projections (quant_method bitnet) are packed uint8 [out/4, in] (code = w + 1; rows r, r + out/4,
// r + 2 out/4, r + 3 out/4 in bits 0-1, 2-3, 4-5, 6-7) with a one-value weight_scale that multiplies (autobitlinear)
// or divides (bitlinear, transformers' default), or unpacked float ternary values (times weight_scale when present),
// or full-precision weights that BitNet b1.58's absmean rule quantizes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "io/model_config.h"
#include "io/safetensors.h"
#include "model/weight_source.h"

namespace tritium {

class SafetensorsSource final : public WeightSource {
 public:
  /// `ws` must outlive the source; c gives the folder (for messages) and BitNet's scale mode.
  SafetensorsSource(const WeightStore& ws, const ModelConfig& c);

  bool has(const std::string& name) const override;
  std::vector<float> vec(const std::string& name, int64_t n) const override;
  std::vector<float> mat(const std::string& name, int64_t rows, int64_t cols) const override;
  Embedding table(const std::string& name, int64_t rows, int64_t cols) const override;
  TernaryWeight ternary(const std::string& prefix, int64_t out, int64_t in) const override;

 private:
  const WeightStore& ws_;
  std::string dir_;
  BitNetScaleMode scale_mode_;
};

/// Unpacks a BitNet packed uint8 weight [out/4, in] into int8 ternary values [out, in].
/// Throws tritium::Error on the unused code 3.
std::vector<int8_t> unpack_bitnet_weight(const uint8_t* packed, int64_t out_features, int64_t in_features);

}  // namespace tritium
