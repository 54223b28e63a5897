// tritium core: element types of tensors on disk and in memory, and scalar conversions.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace tritium {

/// Element types that appear in safetensors files and in tritium's own buffers.
enum class DType { F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL, F8_E4M3 };

/// Size of one element in bytes.
size_t dtype_size(DType t);
/// safetensors spelling ("F32", "BF16", "U8", ...).
std::string_view dtype_name(DType t);
/// Parses a safetensors dtype string; returns false for an unknown one.
bool parse_dtype(std::string_view s, DType* out);

/// bfloat16 bits -> float (exact).
inline float bf16_to_f32(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

/// float -> bfloat16 bits, round to nearest even (NaN stays NaN).
inline uint16_t f32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

/// IEEE half bits -> float (exact, handles subnormals, inf, NaN).
float f16_to_f32(uint16_t h);
/// float -> IEEE half bits, round to nearest even, overflow to inf.
uint16_t f32_to_f16(float f);

}  // namespace tritium
