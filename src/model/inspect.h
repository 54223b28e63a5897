// tritium model: storage statistics of a loaded model, behind `tritium inspect`: per ternary tensor the zero
// density z and the bits/weight of every ternary format (src/formats/ternary_stats.h), totals, and the BITCOS
// paper's Table I summary (% zeros, BITCOS symbols 2 - z, + 16-bit scale overhead, size ratio vs 2-bit and vs
// 5-trit packing).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "io/gguf.h"
#include "model/transformer.h"
#include "formats/ternary_stats.h"

namespace tritium {

/// One weight tensor. Fused ternary projections are split back into their original tensors (q/k/v, gate/up)
/// by their segments, so a Hugging Face BitNet folder and its converted tritium model report the same tensors.
struct InspectedTensor {
  std::string name;      ///< e.g. "model.layers.0.self_attn.q_proj" or "lm_head"
  std::string storage;   ///< Linear::format_name() of the layer holding it
  int64_t rows = 0, cols = 0;
  bool ternary = false;
  TernaryTensorStats stats;  ///< ternary only (scale_bytes counted as 16-bit scales)
  uint64_t scales = 0;       ///< ternary only: number of scales (1 per tensor, or N * ceil(K / 128))
  uint64_t bytes = 0;        ///< bytes as stored in memory now (its share of the layer's weight_bytes())
};

/// Table I of the BITCOS paper, for all ternary weights of a model.
struct BitcosSummary {
  double zero_density = 0;      ///< "% 0" / 100
  double bitcos_symbols = 0;    ///< 2 - z
  double scale_bits = 0;        ///< 16 * scales / weights
  double bitcos_with_scale = 0; ///< 2 - z + scale_bits
  double ratio_vs_2bit = 0;     ///< (2 + scale_bits) / (2 - z + scale_bits); > 1: BITCOS is smaller
  double ratio_vs_5trit = 0;    ///< (1.625 + scale_bits) / (2 - z + scale_bits)
};

struct ModelInspection {
  std::vector<InspectedTensor> tensors;
  uint64_t ternary_weights = 0, ternary_zeros = 0, ternary_scales = 0;
  std::vector<TernaryFormatBits> ternary_totals;  ///< int8, i2, tq1, bitcos: summed bytes; bits over all ternary weights
  BitcosSummary summary;                          ///< valid when ternary_weights > 0
  uint64_t weight_bytes = 0;                      ///< Transformer::weight_bytes()
};

/// Gathers the statistics (unpacks every ternary layer once). Throws tritium::Error on a non-ternary value.
ModelInspection inspect_model(const Transformer& model);

/// One tensor of a GGUF file as stored there.
struct GgufInspectedTensor {
  std::string name;
  std::string type;          ///< ggml type name ("I2_S", "F16", ...)
  std::vector<int64_t> ne;   ///< GGUF order
  uint64_t bytes = 0;        ///< bytes in the file
  double bits_per_weight = 0;  ///< 8 * bytes / numel (scales and block headers included)
  bool ternary = false;      ///< a TQ1_0 / TQ2_0 / I2_S tensor: zeros and zero_density are set
  uint64_t zeros = 0;
  double zero_density = 0;
};

/// Per type: tensors, weights, bytes.
struct GgufTypeTotal {
  std::string type;
  uint64_t tensors = 0, weights = 0, bytes = 0;
};

/// The tensors of a GGUF file in file order (ternary ones decoded once for their zero density) and totals per type
/// in order of first appearance. Throws tritium::Error naming the tensor when a ternary tensor does not decode.
std::vector<GgufInspectedTensor> inspect_gguf(const GgufFile& f, std::vector<GgufTypeTotal>* totals = nullptr);

}  // namespace tritium
