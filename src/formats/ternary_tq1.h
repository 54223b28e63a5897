// tritium formats: the tq1 ternary format — base 3, five trits per byte, in 16-row tiles.
//
// Byte layout (one buffer, "codes"): N padded to Np = 16 * ceil(N / 16), K to Kp = 128 * ceil(K / 128),
// with zero weights. Tile t (rows 16 t .. 16 t + 15), group g (k = 128 g .. 128 g + 127) is a 416-byte
// block at byte (t * Kp / 128 + g) * 416:
//  - bytes [0, 384): six 64-byte sub-blocks s = 0..5 (k = 128 g + 20 s .. + 19). Byte i = 4 r + j
//    (r = row in tile, j = 0..3) packs the codes c_q = w + 1 of W[16 t + r, 128 g + 20 s + 4 q + j],
//    q = 0..4, as v = c_0 * 81 + c_1 * 27 + c_2 * 9 + c_3 * 3 + c_4 (0..242), stored as the byte
//    ceil(v * 256 / 243). Trit q decodes as ((byte * 3^q) mod 256) * 3 >> 8 (the base-3 digits are the
//    byte read as a fixed-point fraction of 243/256), which SIMD does with 16-bit multiplies.
//  - bytes [384, 416): the last 8 k (128 g + 120 .. + 127) as 2-bit codes. Byte i (0..31) holds
//    lane L = i in bits 0-1 (q = 0) and 2-3 (q = 1), and lane L = i + 32 in bits 4-5 (q = 0) and 6-7
//    (q = 1), where lane L = 4 r + j stands for W[16 t + r, 128 g + 120 + 4 q + j].
// Size: Np * Kp / 128 * 26 bytes: 416 bytes per 2048 weights = 1.625 bits/weight (5 trits per byte
// alone would be 1.6; the power-of-two group of 128 costs the 2-bit tail, as in deployed TQ1 formats).
#pragma once

#include "formats/ternary_tiled.h"

namespace tritium {

class TernaryTQ1 final : public TiledTernary {
 public:
  static constexpr int64_t kGroupBytes = 416;
  /// Packs w (int8 [N, K], values in {-1, 0, 1}, not checked here: use pack_ternary).
  TernaryTQ1(const int8_t* w, int64_t n, int64_t k);
  /// Adopts saved bytes (size must be bytes_for(n, k)); copy = false borrows them. Throws tritium::Error.
  TernaryTQ1(int64_t n, int64_t k, std::span<const uint8_t> codes, bool copy);
  TernaryFormat format() const override { return TernaryFormat::kTQ1; }
  std::vector<TernaryBuffer> buffers() const override { return {{"codes", codes_.span()}}; }
  std::span<const uint8_t> codes() const { return codes_.span(); }
  static size_t bytes_for(int64_t n, int64_t k) {
    return static_cast<size_t>(tiles_for(n) * (padded_k_for(k) / kTernaryGroupK) * kGroupBytes);
  }

 private:
  Store codes_;
};

}  // namespace tritium
