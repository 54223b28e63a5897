#include "formats/q6_rows.h"

#include <algorithm>
#include <cmath>

#include "core/dtype.h"
#include "core/error.h"
#include "core/parallel.h"

namespace tritium {

namespace {

// The largest finite fp16 value: a scale above it would round to infinity.
constexpr float kF16Max = 65504.0f;

}  // namespace

Q6Rows quantize_q6_rows(const float* w, int64_t n, int64_t k) {
  TRITIUM_CHECK(n > 0 && k > 0, "q6: shape [{}, {}] must be positive", n, k);
  TRITIUM_CHECK(k % 64 == 0, "q6: the input width {} must be a multiple of 64", k);
  Q6Rows q;
  q.n = n;
  q.k = k;
  const int64_t rb = q.row_bytes(), G = k / kQ6Group;
  q.codes.assign(static_cast<size_t>(n * rb), 0);
  q.scales.assign(static_cast<size_t>(n * G), 0);
  parallel_for(n, 64, [&](int64_t n0, int64_t n1) {
    std::vector<uint8_t> u(static_cast<size_t>(k));
    for (int64_t r = n0; r < n1; ++r) {
      const float* wr = w + r * k;
      for (int64_t g = 0; g < G; ++g) {
        float amax = 0.0f;
        for (int64_t j = 0; j < kQ6Group; ++j) {
          const float v = wr[g * kQ6Group + j];
          if (!std::isfinite(v)) fail("q6: weight [{}, {}] is not finite", r, g * kQ6Group + j);
          amax = std::max(amax, std::fabs(v));
        }
        if (amax / 31.0f > kF16Max)
          fail("q6: weights of row {}, columns {}.. exceed the fp16 scale range", r, g * kQ6Group);
        const uint16_t s16 = f32_to_f16(amax / 31.0f);
        const float s = f16_to_f32(s16);
        q.scales[r * G + g] = s16;
        for (int64_t j = 0; j < kQ6Group; ++j) {
          float c = s > 0.0f ? std::nearbyint(wr[g * kQ6Group + j] / s) : 0.0f;
          c = std::clamp(c, -31.0f, 31.0f);
          u[g * kQ6Group + j] = static_cast<uint8_t>(static_cast<int>(c) + 32);
        }
      }
      uint8_t* cr = q.codes.data() + r * rb;
      for (int64_t b = 0; b < k / 64; ++b) {
        const uint8_t* ub = u.data() + 64 * b;
        uint8_t* blk = cr + 48 * b;
        for (int j = 0; j < 32; ++j) blk[j] = static_cast<uint8_t>((ub[j] & 15) | ((ub[32 + j] & 15) << 4));
        for (int j = 0; j < 16; ++j)
          blk[32 + j] = static_cast<uint8_t>((ub[j] >> 4) | ((ub[16 + j] >> 4) << 2) | ((ub[32 + j] >> 4) << 4) |
                                             ((ub[48 + j] >> 4) << 6));
      }
    }
  });
  return q;
}

std::vector<float> Q6Rows::dequantize() const {
  std::vector<float> out(static_cast<size_t>(n * k));
  const int64_t G = k / kQ6Group, rb = row_bytes();
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < k; ++c)
      out[r * k + c] = static_cast<float>(q6_code(codes.data() + r * rb, c)) * f16_to_f32(scales[r * G + c / kQ6Group]);
  return out;
}

void validate_q6_rows(const Q6Rows& q, const char* what) {
  if (q.n <= 0 || q.k <= 0 || q.k % 64 != 0)
    fail("{}: q6 shape [{}, {}] is invalid (K must be a multiple of 64)", what, q.n, q.k);
  if (q.codes.size() != static_cast<size_t>(q.n * q.row_bytes()))
    fail("{}: q6 codes hold {} bytes, expected {}", what, q.codes.size(), q.n * q.row_bytes());
  if (q.scales.size() != static_cast<size_t>(q.n * q.k / kQ6Group))
    fail("{}: q6 scales hold {} values, expected {}", what, q.scales.size(), q.n * q.k / kQ6Group);
}

}  // namespace tritium
