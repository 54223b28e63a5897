#include "formats/ternary_bitcos.h"

#include <bit>

#include "core/error.h"

namespace tritium {

TernaryBitcos::TernaryBitcos(const int8_t* w, int64_t n, int64_t k) : TiledTernary(TernaryFormat::kBitcos, n, k) {
  const int64_t steps = view_.kp / 4, T = view_.tiles;
  bitmap_ = make_owned(bitmap_bytes_for(n, k));
  offsets_ = make_owned(offsets_bytes_for(n));
  uint64_t* bm = bitmap_.owned.data();
  uint64_t* off = offsets_.owned.data();
  std::vector<uint64_t> signs;
  uint64_t pos = 0;
  for (int64_t t = 0; t < T; ++t) {
    off[t] = pos;
    for (int64_t s = 0; s < steps; ++s) {
      uint64_t word = 0;
      for (int64_t i = 0; i < 64; ++i) {
        const int64_t row = t * 16 + i / 4, col = 4 * s + i % 4;
        const int v = (row < n && col < k) ? w[row * k + col] : 0;
        if (v == 0) continue;
        word |= uint64_t{1} << i;
        if ((pos & 63) == 0) signs.push_back(0);
        if (v < 0) signs.back() |= uint64_t{1} << (pos & 63);
        ++pos;
      }
      bm[t * steps + s] = word;
    }
  }
  off[T] = pos;
  signs.resize(static_cast<size_t>(pos / 64 + 2), 0);  // zero padding for the two-word window reads
  signs_ = make_owned(signs.size() * 8);
  std::copy(signs.begin(), signs.end(), signs_.owned.begin());
  bind();
}

TernaryBitcos::TernaryBitcos(int64_t n, int64_t k, std::span<const uint8_t> bitmap, std::span<const uint8_t> signs,
                             std::span<const uint8_t> sign_offsets, bool copy)
    : TiledTernary(TernaryFormat::kBitcos, n, k) {
  if (bitmap.size() != bitmap_bytes_for(n, k)) {
    fail("bitcos ternary [{}, {}]: bitmap buffer has {} bytes, expected {}", n, k, bitmap.size(),
         bitmap_bytes_for(n, k));
  }
  if (sign_offsets.size() != offsets_bytes_for(n)) {
    fail("bitcos ternary [{}, {}]: sign_offsets buffer has {} bytes, expected {}", n, k, sign_offsets.size(),
         offsets_bytes_for(n));
  }
  bitmap_ = adopt(bitmap, copy, 8);
  offsets_ = adopt(sign_offsets, copy, 8);
  signs_ = adopt(signs, copy, 8);
  const auto* bm = reinterpret_cast<const uint64_t*>(bitmap_.data);
  const auto* off = reinterpret_cast<const uint64_t*>(offsets_.data);
  const int64_t steps = view_.kp / 4, T = view_.tiles;
  if (off[0] != 0) fail("bitcos ternary [{}, {}]: sign_offsets[0] = {}, expected 0", n, k, off[0]);
  for (int64_t t = 0; t < T; ++t) {
    uint64_t count = 0;
    for (int64_t s = 0; s < steps; ++s) count += static_cast<uint64_t>(std::popcount(bm[t * steps + s]));
    if (off[t + 1] < off[t] || off[t + 1] - off[t] != count) {
      fail("bitcos ternary [{}, {}]: sign_offsets of tile {} do not match its bitmap ({} non-zeros)", n, k, t,
           count);
    }
  }
  if (signs.size() != signs_bytes_for(off[T])) {
    fail("bitcos ternary [{}, {}]: signs buffer has {} bytes, expected {} for {} non-zeros", n, k, signs.size(),
         signs_bytes_for(off[T]), off[T]);
  }
  bind();
}

void TernaryBitcos::bind() {
  view_.bitmap = reinterpret_cast<const uint64_t*>(bitmap_.data);
  view_.signs = reinterpret_cast<const uint64_t*>(signs_.data);
  view_.sign_offsets = reinterpret_cast<const uint64_t*>(offsets_.data);
}

}  // namespace tritium
