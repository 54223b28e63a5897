#include "formats/ternary_i2.h"

#include "core/error.h"

namespace tritium {

TernaryI2::TernaryI2(const int8_t* w, int64_t n, int64_t k) : TiledTernary(TernaryFormat::kI2, n, k) {
  codes_ = make_owned(bytes_for(n, k));
  view_.codes = codes_.data;
  pack_rows(w, 0, n);
}

TernaryI2::TernaryI2(int64_t n, int64_t k, int64_t block_rows,
                     const std::function<void(int64_t r0, int64_t rows, int8_t* w)>& fill)
    : TiledTernary(TernaryFormat::kI2, n, k) {
  TRITIUM_CHECK(block_rows > 0 && block_rows % 16 == 0, "i2: block of {} rows is not a multiple of 16", block_rows);
  codes_ = make_owned(bytes_for(n, k));
  view_.codes = codes_.data;
  std::vector<int8_t> w(static_cast<size_t>(std::min(n, block_rows) * k));
  for (int64_t r0 = 0; r0 < n; r0 += block_rows) {
    const int64_t rows = std::min(block_rows, n - r0);
    fill(r0, rows, w.data());
    pack_rows(w.data(), r0, rows);
  }
}

void TernaryI2::pack_rows(const int8_t* w, int64_t r0, int64_t rows) {
  uint8_t* out = const_cast<uint8_t*>(codes_.data);
  const int64_t kp = view_.kp, blocks = kp / 16, k = view_.k;
  for (int64_t t = r0 / 16; t < (r0 + rows + 15) / 16; ++t) {
    for (int64_t b = 0; b < blocks; ++b) {
      uint8_t* blk = out + (t * blocks + b) * 64;
      for (int64_t r = 0; r < 16; ++r) {
        const int64_t row = t * 16 + r - r0;  // within w
        for (int64_t j = 0; j < 4; ++j) {
          uint8_t byte = 0;
          for (int64_t q = 0; q < 4; ++q) {
            const int64_t col = 16 * b + 4 * q + j;
            const int v = (row < rows && col < k) ? w[row * k + col] : 0;
            byte |= static_cast<uint8_t>((v + 1) << (2 * q));
          }
          blk[4 * r + j] = byte;
        }
      }
    }
  }
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
