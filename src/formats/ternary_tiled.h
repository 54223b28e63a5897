// tritium formats: the common base of the tiled ternary formats (i2, tq1, bitcos): 16-row tiles, K padded
// to a multiple of 128, storage held either owned or borrowed (e.g. from an mmap'ed model file).
#pragma once

#include <span>
#include <vector>

#include "formats/ternary_format.h"
#include "formats/ternary_view.h"

namespace tritium {

class TiledTernary : public PackedTernary {
 public:
  size_t bytes() const override;
  void unpack(int8_t* out) const override;
  /// The kernels' view of the packed data.
  const TernaryView& view() const { return view_; }
  /// Tiles of 16 rows: ceil(N / 16).
  int64_t tiles() const { return view_.tiles; }
  /// K padded up to a multiple of 128.
  int64_t padded_k() const { return view_.kp; }

  static int64_t tiles_for(int64_t n) { return (n + kTileRows - 1) / kTileRows; }
  static int64_t padded_k_for(int64_t k) { return (k + kTernaryGroupK - 1) / kTernaryGroupK * kTernaryGroupK; }

 protected:
  TiledTernary(TernaryFormat f, int64_t n, int64_t k);
  /// One storage buffer: either owned (64-bit aligned) or borrowed.
  struct Store {
    std::vector<uint64_t> owned;
    const uint8_t* data = nullptr;
    size_t size = 0;
    std::span<const uint8_t> span() const { return {data, size}; }
  };
  /// Allocates an owned, zero-filled buffer of `size` bytes.
  static Store make_owned(size_t size);
  /// Borrows `bytes` (or copies them when copy is set, or when align > 1 and they are misaligned).
  static Store adopt(std::span<const uint8_t> bytes, bool copy, size_t align);
  TernaryView view_;
};

}  // namespace tritium
