// tritium kv: FP8 E4M3 (OCP 8-bit floating point, "e4m3fn": no infinities, max 448) conversions,
// used to emulate the fp8 KV cache on CPU.
#pragma once

#include <cstdint>

namespace tritium {

/// float -> e4m3fn bits, round to nearest even, saturating to +-448; NaN -> 0x7f.
uint8_t f32_to_fp8_e4m3(float f);
/// e4m3fn bits -> float (exact).
float fp8_e4m3_to_f32(uint8_t b);

}  // namespace tritium
