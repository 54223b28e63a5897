// tritium formats: the geometry shared by the tiled ternary formats (i2, tq1, bitcos) and the read-only view
// of one packed matrix that the CPU kernels (kernels/cpu/ternary_kernels.h) consume.
//
// Tiles of 16 consecutive output rows; K padded to Kp, a multiple of 128; a "k-step" is 4 consecutive k.
// The byte layout of each format's payload is documented in formats/ternary_{i2,tq1,bitcos}.h.
#pragma once

#include <cstdint>

#include "formats/ternary_format.h"

namespace tritium {

inline constexpr int64_t kTileRows = 16;   ///< output rows per tile
inline constexpr int64_t kStepK = 4;       ///< k per k-step (one 32-bit lane of vpdpbusd)
inline constexpr int64_t kStepBytes = 64;  ///< bytes of decoded codes per k-step of one tile

/// Read-only view of a packed i2 / tq1 / bitcos matrix (owned by the format object).
struct TernaryView {
  TernaryFormat fmt = TernaryFormat::kI2;
  int64_t n = 0, k = 0;         ///< logical shape [N, K]
  int64_t tiles = 0;            ///< ceil(N / 16)
  int64_t kp = 0;               ///< K padded up to a multiple of 128
  const uint8_t* codes = nullptr;          ///< i2 / tq1 payload
  const uint64_t* bitmap = nullptr;        ///< bitcos presence words [tiles][kp / 4]
  const uint64_t* signs = nullptr;         ///< bitcos sign words (+ one trailing zero word)
  const uint64_t* sign_offsets = nullptr;  ///< bitcos [tiles + 1] bit offset of each tile's signs
  int64_t groups() const { return kp / kTernaryGroupK; }
  int64_t steps() const { return kp / kStepK; }
};

/// Scalar decode of tile t of `w` to ternary values int8 [16][kp] (rows past N and k past K are 0), straight
/// from the documented byte layout: the definition of each format, and the oracle of the SIMD decoders.
void ternary_decode_tile(const TernaryView& w, int64_t t, int8_t* out);

}  // namespace tritium
