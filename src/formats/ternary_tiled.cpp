#include "formats/ternary_tiled.h"

#include <cstring>

#include "core/error.h"

namespace tritium {

TiledTernary::TiledTernary(TernaryFormat f, int64_t n, int64_t k) : PackedTernary(n, k) {
  if (n <= 0 || k <= 0) fail("ternary format {}: shape [{}, {}] must be positive", ternary_format_name(f), n, k);
  view_.fmt = f;
  view_.n = n;
  view_.k = k;
  view_.tiles = tiles_for(n);
  view_.kp = padded_k_for(k);
}

size_t TiledTernary::bytes() const {
  size_t total = 0;
  for (const TernaryBuffer& b : buffers()) total += b.bytes.size();
  return total;
}

void TiledTernary::unpack(int8_t* out) const {
  std::vector<int8_t> tile(static_cast<size_t>(kTileRows * view_.kp));
  for (int64_t t = 0; t < view_.tiles; ++t) {
    ternary_decode_tile(view_, t, tile.data());
    for (int64_t r = 0; r < kTileRows && t * kTileRows + r < n_; ++r) {
      std::memcpy(out + (t * kTileRows + r) * k_, tile.data() + r * view_.kp, static_cast<size_t>(k_));
    }
  }
}

TiledTernary::Store TiledTernary::make_owned(size_t size) {
  Store s;
  s.owned.assign((size + 7) / 8, 0);
  s.data = reinterpret_cast<const uint8_t*>(s.owned.data());
  s.size = size;
  return s;
}

TiledTernary::Store TiledTernary::adopt(std::span<const uint8_t> bytes, bool copy, size_t align) {
  const bool misaligned = align > 1 && reinterpret_cast<uintptr_t>(bytes.data()) % align != 0;
  if (!copy && !misaligned) {
    Store s;
    s.data = bytes.data();
    s.size = bytes.size();
    return s;
  }
  Store s = make_owned(bytes.size());
  if (!bytes.empty()) std::memcpy(s.owned.data(), bytes.data(), bytes.size());
  return s;
}

}  // namespace tritium
