// tritium formats: the i2 ternary format — 2-bit codes in 16-row tiles, laid out for VNNI / maddubs decode.
//
// Byte layout (one buffer, "codes"): N is padded to Np = 16 * ceil(N / 16) rows and K to Kp = 128 *
// ceil(K / 128) with zero weights. The matrix is a sequence of tiles t = 0 .. Np/16 - 1 (rows 16 t ..
// 16 t + 15); each tile is Kp / 16 blocks of 64 bytes (block b covers k = 16 b .. 16 b + 15), so tile t,
// block b starts at byte (t * Kp / 16 + b) * 64. In a block, byte i = 4 r + j (r = row in tile 0..15,
// j = 0..3) holds four 2-bit codes c = w + 1 (0 = -1, 1 = 0, 2 = +1; 3 is never written):
//   bits 2q .. 2q+1  ->  W[16 t + r, 16 b + 4 q + j],  q = 0..3.
// So one 64-byte load, shifted right by 2q and masked with 3, gives the 64 codes of k-step 4 b + q in lane
// order (byte 4 r + j = row r, k = 4 (4 b + q) + j), ready for vpdpbusd with a broadcast 4-byte x chunk.
// Size: Np * Kp / 4 bytes; 2 bits/weight (plus padding when N % 16 or K % 128 is not 0).
#pragma once

#include <functional>

#include "formats/ternary_tiled.h"

namespace tritium {

class TernaryI2 final : public TiledTernary {
 public:
  /// Packs w (int8 [N, K], values in {-1, 0, 1}, not checked here: use pack_ternary).
  TernaryI2(const int8_t* w, int64_t n, int64_t k);
  /// Packs an [n, k] matrix a block of rows at a time, so that it never exists as one int8 per weight:
  /// fill(r0, rows, w) writes rows [r0, r0 + rows) as int8 [rows, k] (values in {-1, 0, 1}) into w; block_rows is
  /// a multiple of 16 (the last block may be shorter).
  TernaryI2(int64_t n, int64_t k, int64_t block_rows,
            const std::function<void(int64_t r0, int64_t rows, int8_t* w)>& fill);
  /// Adopts saved bytes (size must be bytes_for(n, k)); copy = false borrows them. Throws tritium::Error.
  TernaryI2(int64_t n, int64_t k, std::span<const uint8_t> codes, bool copy);
  TernaryFormat format() const override { return TernaryFormat::kI2; }
  std::vector<TernaryBuffer> buffers() const override { return {{"codes", codes_.span()}}; }
  std::span<const uint8_t> codes() const { return codes_.span(); }
  /// Bytes of the codes buffer for an [n, k] matrix.
  static size_t bytes_for(int64_t n, int64_t k) {
    return static_cast<size_t>(tiles_for(n) * padded_k_for(k) / 16 * 64);
  }

 private:
  // Writes the tiles of rows [r0, r0 + rows) (r0 a multiple of 16) from w (int8 [rows, k]).
  void pack_rows(const int8_t* w, int64_t r0, int64_t rows);
  Store codes_;
};

}  // namespace tritium
