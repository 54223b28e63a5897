// tritium formats: zero density and bits/weight of a ternary tensor in every storage format (for
// `tritium inspect` and the format choice). Figures follow the BITCOS paper's accounting: "symbols only"
// counts just the ternary codes, "with overhead" adds index/offset words and tile/group padding (the
// exact bytes pack_ternary would produce), "with scales" adds the scale bytes stored with the tensor.
#pragma once

#include <cstdint>
#include <vector>

#include "formats/ternary_format.h"

namespace tritium {

struct TernaryFormatBits {
  TernaryFormat format;
  uint64_t bytes = 0;               ///< packed weight bytes, overhead included (= PackedTernary::bytes())
  double bits_symbols = 0;          ///< int8: 8, i2: 2, tq1: 8/5 = 1.6, bitcos: 2 - z
  double bits_with_overhead = 0;    ///< 8 * bytes / (N * K)
  double bits_with_scales = 0;      ///< 8 * (bytes + scale_bytes) / (N * K)
};

struct TernaryTensorStats {
  int64_t rows = 0, cols = 0;
  uint64_t count = 0, zeros = 0, positives = 0, negatives = 0;
  double zero_density = 0;                 ///< z = zeros / count
  std::vector<TernaryFormatBits> formats;  ///< int8, i2, tq1, bitcos (in that order)
  const TernaryFormatBits& get(TernaryFormat f) const;
};

/// Statistics of ternary w (int8 [N, K], values in {-1, 0, 1}). scale_bytes: bytes of scales stored with
/// the tensor (2 for one bf16 per-tensor scale; 2 * N * ceil(K / 128) for fp16 group scales).
/// Throws tritium::Error on a non-ternary value or a non-positive shape.
TernaryTensorStats ternary_tensor_stats(const int8_t* w, int64_t n, int64_t k, uint64_t scale_bytes = 2);

}  // namespace tritium
