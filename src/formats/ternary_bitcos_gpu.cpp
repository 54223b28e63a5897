#include "formats/ternary_bitcos_gpu.h"

#include <limits>

#include "core/error.h"

namespace tritium::cuda {

BitcosGpu pack_bitcos_gpu(const int8_t* w, int64_t n, int64_t k) {
  TRITIUM_CHECK(n > 0 && k > 0, "pack_bitcos_gpu: bad shape {} x {}", n, k);
  BitcosGpu b;
  b.n = n, b.k = k, b.kp = (k + 63) / 64 * 64, b.groups = b.kp / 32;
  b.masks.assign(static_cast<size_t>(n * b.groups), 0u);
  b.row_offsets.assign(static_cast<size_t>(n + 1), 0u);
  b.signs.reserve(static_cast<size_t>(n * ((k + 31) / 32)) + 1);
  for (int64_t r = 0; r < n; ++r) {
    const int8_t* row = w + r * k;
    uint32_t* m = b.masks.data() + r * b.groups;
    TRITIUM_CHECK(b.signs.size() <= std::numeric_limits<uint32_t>::max(),
                  "pack_bitcos_gpu: {} x {} too large for 32-bit sign word offsets", n, k);
    b.row_offsets[static_cast<size_t>(r)] = static_cast<uint32_t>(b.signs.size());
    uint32_t cur = 0;
    int bits = 0;
    for (int64_t c = 0; c < k; ++c) {
      const int v = row[c];
      TRITIUM_CHECK(v >= -1 && v <= 1, "pack_bitcos_gpu: weight [{}, {}] = {} is not ternary", r, c, v);
      if (v == 0) continue;
      m[c / 32] |= 1u << (c % 32);
      cur |= static_cast<uint32_t>(v < 0) << bits;
      ++b.nonzeros;
      if (++bits == 32) {
        b.signs.push_back(cur);
        cur = 0, bits = 0;
      }
    }
    if (bits) b.signs.push_back(cur);
  }
  TRITIUM_CHECK(b.signs.size() <= std::numeric_limits<uint32_t>::max(),
                "pack_bitcos_gpu: {} x {} too large for 32-bit sign word offsets", n, k);
  b.row_offsets[static_cast<size_t>(n)] = static_cast<uint32_t>(b.signs.size());
  b.signs.push_back(0u);  // the trailing word of the two-word window
  return b;
}

std::vector<int8_t> unpack_bitcos_gpu(const BitcosGpu& b) {
  std::vector<int8_t> out(static_cast<size_t>(b.n * b.k), 0);
  for (int64_t r = 0; r < b.n; ++r) {
    const uint32_t* s = b.signs.data() + b.row_offsets[static_cast<size_t>(r)];
    uint64_t e = 0;
    for (int64_t c = 0; c < b.kp; ++c) {
      if (!((b.masks[static_cast<size_t>(r * b.groups + c / 32)] >> (c % 32)) & 1u)) continue;
      const int neg = static_cast<int>((s[e / 32] >> (e % 32)) & 1u);
      ++e;
      if (c < b.k) out[static_cast<size_t>(r * b.k + c)] = static_cast<int8_t>(neg ? -1 : 1);
    }
  }
  return out;
}

}  // namespace tritium::cuda
