// The scalar decoder of the tiled ternary formats: every weight from the documented byte layout (2-bit codes for
// i2, base-3 digits by division for tq1, a bit walk for bitcos), no SIMD and no lookup tables.
#include "formats/ternary_tq1.h"
#include "formats/ternary_view.h"

namespace tritium {

void ternary_decode_tile(const TernaryView& w, int64_t t, int8_t* out) {
  const int64_t kp = w.kp;
  switch (w.fmt) {
    case TernaryFormat::kI2: {
      const uint8_t* tile = w.codes + t * (kp / 16) * 64;
      for (int64_t r = 0; r < 16; ++r)
        for (int64_t k = 0; k < kp; ++k) {
          const int64_t b = k / 16, q = (k % 16) / 4, j = k % 4;
          const int code = (tile[b * 64 + 4 * r + j] >> (2 * q)) & 3;
          out[r * kp + k] = static_cast<int8_t>(code - 1);
        }
      return;
    }
    case TernaryFormat::kTQ1: {
      const int64_t G = kp / kTernaryGroupK;
      static constexpr int kPow3[5] = {81, 27, 9, 3, 1};
      for (int64_t r = 0; r < 16; ++r)
        for (int64_t k = 0; k < kp; ++k) {
          const uint8_t* blk = w.codes + (t * G + k / 128) * TernaryTQ1::kGroupBytes;
          const int64_t kk = k % 128, j = kk % 4;
          int code;
          if (kk < 120) {
            const int64_t s = kk / 20, q = (kk % 20) / 4;
            const int v = (blk[s * 64 + 4 * r + j] * 243) >> 8;  // inverse of ceil(v * 256 / 243)
            code = v / kPow3[q] % 3;
          } else {
            const int64_t q = (kk - 120) / 4, lane = 4 * r + j;
            const int shift = (lane >= 32 ? 4 : 0) + 2 * static_cast<int>(q);
            code = (blk[384 + lane % 32] >> shift) & 3;
          }
          out[r * kp + k] = static_cast<int8_t>(code - 1);
        }
      return;
    }
    case TernaryFormat::kBitcos: {
      const int64_t steps = kp / 4;
      uint64_t pos = w.sign_offsets[t];
      for (int64_t s = 0; s < steps; ++s) {
        const uint64_t word = w.bitmap[t * steps + s];
        for (int64_t i = 0; i < 64; ++i) {
          int8_t v = 0;
          if ((word >> i) & 1) {
            v = ((w.signs[pos / 64] >> (pos % 64)) & 1) ? -1 : 1;
            ++pos;
          }
          out[(i / 4) * kp + 4 * s + i % 4] = v;
        }
      }
      return;
    }
    case TernaryFormat::kInt8: break;
  }
}

}  // namespace tritium
