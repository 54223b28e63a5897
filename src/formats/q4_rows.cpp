#include "formats/q4_rows.h"

#include <algorithm>
#include <cmath>

#include "core/dtype.h"
#include "core/error.h"
#include "core/parallel.h"

namespace tritium {

Q4Rows quantize_q4_rows(const float* w, int64_t n, int64_t k) {
  TRITIUM_CHECK(n > 0 && k > 0, "q4: shape [{}, {}] must be positive", n, k);
  TRITIUM_CHECK(k % 64 == 0, "q4: the input width {} must be a multiple of 64", k);
  Q4Rows q;
  q.n = n;
  q.k = k;
  q.codes.assign(static_cast<size_t>(n * k / 2), 0);
  q.scales.assign(static_cast<size_t>(n * k / kQ4Group), 0);
  const int64_t G = k / kQ4Group;
  parallel_for(n, 64, [&](int64_t n0, int64_t n1) {
    std::vector<uint8_t> u(static_cast<size_t>(k));
    for (int64_t r = n0; r < n1; ++r) {
      const float* wr = w + r * k;
      for (int64_t g = 0; g < G; ++g) {
        float amax = 0.0f;
        for (int64_t j = 0; j < kQ4Group; ++j) {
          const float v = wr[g * kQ4Group + j];
          if (!std::isfinite(v)) fail("q4: weight [{}, {}] is not finite", r, g * kQ4Group + j);
          amax = std::max(amax, std::fabs(v));
        }
        const uint16_t s16 = f32_to_f16(amax / 7.0f);
        const float s = f16_to_f32(s16);
        q.scales[r * G + g] = s16;
        for (int64_t j = 0; j < kQ4Group; ++j) {
          float c = s > 0.0f ? std::nearbyint(wr[g * kQ4Group + j] / s) : 0.0f;
          c = std::clamp(c, -7.0f, 7.0f);
          u[g * kQ4Group + j] = static_cast<uint8_t>(static_cast<int>(c) + 8);
        }
      }
      uint8_t* cr = q.codes.data() + r * k / 2;
      for (int64_t b = 0; b < k / 64; ++b)
        for (int j = 0; j < 32; ++j) cr[b * 32 + j] = static_cast<uint8_t>(u[64 * b + j] | (u[64 * b + 32 + j] << 4));
    }
  });
  return q;
}


std::vector<float> Q4Rows::dequantize() const {
  std::vector<float> out(static_cast<size_t>(n * k));
  const int64_t G = k / kQ4Group;
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < k; ++c)
      out[r * k + c] = static_cast<float>(q4_code(codes.data() + r * k / 2, c)) * f16_to_f32(scales[r * G + c / kQ4Group]);
  return out;
}

void validate_q4_rows(const Q4Rows& q, const char* what) {
  if (q.n <= 0 || q.k <= 0 || q.k % 64 != 0) fail("{}: q4 shape [{}, {}] is invalid (K must be a multiple of 64)", what, q.n, q.k);
  if (q.codes.size() != static_cast<size_t>(q.n * q.k / 2))
    fail("{}: q4 codes hold {} bytes, expected {}", what, q.codes.size(), q.n * q.k / 2);
  if (q.scales.size() != static_cast<size_t>(q.n * q.k / kQ4Group))
    fail("{}: q4 scales hold {} values, expected {}", what, q.scales.size(), q.n * q.k / kQ4Group);
}

}  // namespace tritium
