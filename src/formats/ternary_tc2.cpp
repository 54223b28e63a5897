#include "formats/ternary_tc2.h"

#include "core/error.h"

namespace tritium::cuda {

std::vector<uint32_t> pack_tc2(const int8_t* w, int64_t n, int64_t k) {
  TRITIUM_CHECK(n > 0 && k > 0, "pack_tc2: bad shape {} x {}", n, k);
  const Tc2Shape s = Tc2Shape::of(n, k);
  const int64_t wpr = s.kp / 16;
  // Code 1 (weight 0) everywhere: 0b01 in each 2-bit field.
  std::vector<uint32_t> out(static_cast<size_t>(s.words()), 0x55555555u);
  for (int64_t r = 0; r < n; ++r) {
    const int8_t* row = w + r * k;
    uint32_t* dst = out.data() + r * wpr;
    for (int64_t c = 0; c < k; ++c) {
      const int v = row[c];
      TRITIUM_CHECK(v >= -1 && v <= 1, "pack_tc2: weight [{}, {}] = {} is not ternary", r, c, v);
      const int64_t j = c / 16, g = (c % 16) / 4, b = c % 4;
      const int shift = static_cast<int>(8 * b + 2 * g);
      dst[j] = (dst[j] & ~(3u << shift)) | (static_cast<uint32_t>(v + 1) << shift);
    }
  }
  return out;
}

std::vector<int8_t> unpack_tc2(const uint32_t* words, int64_t n, int64_t k) {
  const Tc2Shape s = Tc2Shape::of(n, k);
  const int64_t wpr = s.kp / 16;
  std::vector<int8_t> out(static_cast<size_t>(n * k));
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < k; ++c) {
      const int64_t j = c / 16, g = (c % 16) / 4, b = c % 4;
      const uint32_t code = (words[r * wpr + j] >> (8 * b + 2 * g)) & 3u;
      out[r * k + c] = static_cast<int8_t>(static_cast<int>(code) - 1);
    }
  return out;
}

}  // namespace tritium::cuda
