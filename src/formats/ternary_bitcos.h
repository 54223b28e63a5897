// tritium formats: the BITCOS ternary format (BITmap + COmpacted Signs): a presence bitmap of 1 bit per
// weight and a sign vector of 1 bit per non-zero weight, 2 - z bits/weight for zero density z. The
// AVX-512 decode expands the signs with pdep onto the positions the bitmap marks and builds the codes with
// two masked byte moves (see the BITCOS paper, section II-B; here for int8 VNNI instead of fp16).
//
// Byte layout (three buffers, all little-endian 64-bit words; N padded to Np = 16 * ceil(N / 16) rows and
// K to Kp = 128 * ceil(K / 128) with zero weights; T = Np / 16 tiles of 16 rows):
//  - "bitmap": uint64 [T][Kp / 4]. Word s of tile t covers k-step s (k = 4 s .. 4 s + 3) of rows
//    16 t .. 16 t + 15: bit i = 4 r + j is set iff W[16 t + r, 4 s + j] != 0. (One word = one 64-byte
//    vector of codes in lane order, so it loads straight into an AVX-512 mask register.)
//  - "signs": uint64 [floor(S / 64) + 2], S = number of non-zero weights. The sign bits, 1 = negative, in
//    the order (tile, word s, bit i) of the set bitmap bits; bit e of the stream is bit e % 64 of word
//    e / 64. Tiles follow each other with no alignment; the zero padding after bit S lets the decoder read
//    a 64-bit window with two word loads (words p / 64 and p / 64 + 1) at any position p <= S.
//  - "sign_offsets": uint64 [T + 1]: bit position in "signs" where tile t starts (entry T = S). This is
//    the index that lets threads start at any tile: 64 bits per 16 rows.
// Size: Np * Kp / 8 + 8 * (floor(S / 64) + 2) + 8 * (T + 1) bytes.
#pragma once

#include "formats/ternary_tiled.h"

namespace tritium {

class TernaryBitcos final : public TiledTernary {
 public:
  /// Packs w (int8 [N, K], values in {-1, 0, 1}, not checked here: use pack_ternary).
  TernaryBitcos(const int8_t* w, int64_t n, int64_t k);
  /// Adopts saved buffers (bitmap, signs, sign_offsets as from buffers()); copy = false borrows them
  /// unless misaligned for uint64. Checks sizes and that each tile's offset step equals its bitmap
  /// popcount; throws tritium::Error otherwise.
  TernaryBitcos(int64_t n, int64_t k, std::span<const uint8_t> bitmap, std::span<const uint8_t> signs,
                std::span<const uint8_t> sign_offsets, bool copy);
  TernaryFormat format() const override { return TernaryFormat::kBitcos; }
  std::vector<TernaryBuffer> buffers() const override {
    return {{"bitmap", bitmap_.span()}, {"signs", signs_.span()}, {"sign_offsets", offsets_.span()}};
  }
  /// Number of non-zero weights (= sign bits).
  uint64_t nonzeros() const { return view_.sign_offsets[view_.tiles]; }
  static size_t bitmap_bytes_for(int64_t n, int64_t k) {
    return static_cast<size_t>(tiles_for(n) * 16 * padded_k_for(k) / 8);
  }
  static size_t signs_bytes_for(uint64_t nonzeros) { return static_cast<size_t>(8 * (nonzeros / 64 + 2)); }
  static size_t offsets_bytes_for(int64_t n) { return static_cast<size_t>(8 * (tiles_for(n) + 1)); }
  /// Total bytes for an [n, k] matrix with that many non-zeros.
  static size_t bytes_for(int64_t n, int64_t k, uint64_t nonzeros) {
    return bitmap_bytes_for(n, k) + signs_bytes_for(nonzeros) + offsets_bytes_for(n);
  }

 private:
  void bind();
  Store bitmap_, signs_, offsets_;
};

}  // namespace tritium
