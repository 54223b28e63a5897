#include "formats/ternary_tq1.h"

#include "core/error.h"

namespace tritium {

TernaryTQ1::TernaryTQ1(const int8_t* w, int64_t n, int64_t k) : TiledTernary(TernaryFormat::kTQ1, n, k) {
  codes_ = make_owned(bytes_for(n, k));
  uint8_t* out = const_cast<uint8_t*>(codes_.data);
  const int64_t groups = view_.kp / kTernaryGroupK;
  auto code = [&](int64_t row, int64_t col) -> int { return (row < n && col < k) ? w[row * k + col] + 1 : 1; };
  for (int64_t t = 0; t < view_.tiles; ++t) {
    for (int64_t g = 0; g < groups; ++g) {
      uint8_t* blk = out + (t * groups + g) * kGroupBytes;
      const int64_t k0 = g * kTernaryGroupK;
      for (int64_t lane = 0; lane < 64; ++lane) {
        const int64_t row = t * 16 + lane / 4, j = lane % 4;
        for (int64_t s = 0; s < 6; ++s) {
          int v = 0;
          for (int64_t q = 0; q < 5; ++q) v = v * 3 + code(row, k0 + 20 * s + 4 * q + j);
          blk[s * 64 + lane] = static_cast<uint8_t>((v * 256 + 242) / 243);
        }
        const int c0 = code(row, k0 + 120 + j), c1 = code(row, k0 + 124 + j);
        const int bits = c0 | (c1 << 2);
        if (lane < 32) blk[384 + lane] |= static_cast<uint8_t>(bits);
        else blk[384 + lane - 32] |= static_cast<uint8_t>(bits << 4);
      }
    }
  }
  view_.codes = codes_.data;
}

TernaryTQ1::TernaryTQ1(int64_t n, int64_t k, std::span<const uint8_t> codes, bool copy)
    : TiledTernary(TernaryFormat::kTQ1, n, k) {
  if (codes.size() != bytes_for(n, k)) {
    fail("tq1 ternary [{}, {}]: codes buffer has {} bytes, expected {}", n, k, codes.size(), bytes_for(n, k));
  }
  codes_ = adopt(codes, copy, 1);
  view_.codes = codes_.data;
}

}  // namespace tritium
