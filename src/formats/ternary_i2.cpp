#include "formats/ternary_i2.h"

#include "core/error.h"

namespace tritium {

TernaryI2::TernaryI2(const int8_t* w, int64_t n, int64_t k) : TiledTernary(TernaryFormat::kI2, n, k) {
  codes_ = make_owned(bytes_for(n, k));
  uint8_t* out = const_cast<uint8_t*>(codes_.data);
  const int64_t kp = view_.kp, blocks = kp / 16;
  for (int64_t t = 0; t < view_.tiles; ++t) {
    for (int64_t b = 0; b < blocks; ++b) {
      uint8_t* blk = out + (t * blocks + b) * 64;
      for (int64_t r = 0; r < 16; ++r) {
        const int64_t row = t * 16 + r;
        for (int64_t j = 0; j < 4; ++j) {
          uint8_t byte = 0;
          for (int64_t q = 0; q < 4; ++q) {
            const int64_t col = 16 * b + 4 * q + j;
            const int v = (row < n && col < k) ? w[row * k + col] : 0;
            byte |= static_cast<uint8_t>((v + 1) << (2 * q));
          }
          blk[4 * r + j] = byte;
        }
      }
    }
  }
  view_.codes = codes_.data;
}

TernaryI2::TernaryI2(int64_t n, int64_t k, std::span<const uint8_t> codes, bool copy)
    : TiledTernary(TernaryFormat::kI2, n, k) {
  if (codes.size() != bytes_for(n, k)) {
    fail("i2 ternary [{}, {}]: codes buffer has {} bytes, expected {}", n, k, codes.size(), bytes_for(n, k));
  }
  codes_ = adopt(codes, copy, 1);
  view_.codes = codes_.data;
}

}  // namespace tritium
