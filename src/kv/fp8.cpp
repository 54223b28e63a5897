#include "kv/fp8.h"

#include <cmath>

namespace tritium {

float fp8_e4m3_to_f32(uint8_t b) {
  const int sign = b >> 7, exp = (b >> 3) & 0xf, mant = b & 0x7;
  if (exp == 0xf && mant == 0x7) return NAN;
  float v = exp == 0 ? std::ldexp(static_cast<float>(mant), -9)
                     : std::ldexp(static_cast<float>(8 + mant), exp - 10);
  return sign ? -v : v;
}

uint8_t f32_to_fp8_e4m3(float f) {
  if (std::isnan(f)) return 0x7f;
  const uint8_t sign = std::signbit(f) ? 0x80 : 0;
  float a = std::fabs(f);
  if (a == 0.0f) return sign;           // frexp gives no exponent to round against
  if (a >= 448.0f) return sign | 0x7e;  // saturate to max finite
  // Find the nearest representable value by rounding the scaled mantissa (ties to even).
  int e;
  std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  int exp = e - 1 + 7;  // biased exponent for 1.xxx * 2^(e-1)
  if (exp < 1) {        // subnormal: step 2^-9
    const float q = std::nearbyint(std::ldexp(a, 9));
    const int m = static_cast<int>(q);
    if (m >= 8) return sign | 0x08;  // rounded up into the smallest normal
    return sign | static_cast<uint8_t>(m);
  }
  float q = std::nearbyint(std::ldexp(a, -(e - 1) + 3));  // in [8, 16]
  int m = static_cast<int>(q);
  if (m == 16) { m = 8; ++exp; }
  if (exp > 15 || (exp == 15 && m - 8 > 6)) return sign | 0x7e;
  return sign | static_cast<uint8_t>((exp << 3) | (m - 8));
}

}  // namespace tritium
