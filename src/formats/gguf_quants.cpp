#include "formats/gguf_quants.h"

#include <cmath>
#include <cstring>

#include "core/dtype.h"
#include "core/error.h"

namespace tritium {
namespace {

uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

constexpr int64_t kQ8_0Bytes = 34, kTQ2Bytes = 66, kTQ1Bytes = 54;

}  // namespace

void dequantize_q8_0(const uint8_t* src, int64_t n, float* dst) {
  for (int64_t b = 0; b < n / kQ8_0Block; ++b) {
    const uint8_t* blk = src + b * kQ8_0Bytes;
    const float d = f16_to_f32(load_u16(blk));
    const auto* q = reinterpret_cast<const int8_t*>(blk + 2);
    for (int64_t j = 0; j < kQ8_0Block; ++j) dst[b * kQ8_0Block + j] = static_cast<float>(q[j]) * d;
  }
}

void decode_tq2_0(const uint8_t* src, int64_t n, int8_t* values, float* scales) {
  for (int64_t b = 0; b < n / kTQBlock; ++b) {
    const uint8_t* qs = src + b * kTQ2Bytes;
    int8_t* y = values + b * kTQBlock;
    for (int c = 0; c < 2; ++c)
      for (int g = 0; g < 4; ++g)
        for (int p = 0; p < 32; ++p) y[128 * c + 32 * g + p] = static_cast<int8_t>(((qs[32 * c + p] >> (2 * g)) & 3) - 1);
    scales[b] = f16_to_f32(load_u16(qs + 64));
  }
}

void decode_tq1_0(const uint8_t* src, int64_t n, int8_t* values, float* scales) {
  static constexpr uint8_t kPow3[5] = {1, 3, 9, 27, 81};
  // Digit k of a byte: the byte times 3^k wraps modulo 256, and the top base-3 digit of that fraction is (q * 3) >> 8.
  auto digit = [](uint8_t byte, int k) {
    const uint8_t q = static_cast<uint8_t>(byte * kPow3[k]);
    return static_cast<int8_t>(((static_cast<uint16_t>(q) * 3) >> 8) - 1);
  };
  for (int64_t b = 0; b < n / kTQBlock; ++b) {
    const uint8_t* qs = src + b * kTQ1Bytes;
    const uint8_t* qh = qs + 48;
    int8_t* y = values + b * kTQBlock;
    for (int k = 0; k < 5; ++k)
      for (int p = 0; p < 32; ++p) y[32 * k + p] = digit(qs[p], k);
    for (int k = 0; k < 5; ++k)
      for (int p = 0; p < 16; ++p) y[160 + 16 * k + p] = digit(qs[32 + p], k);
    for (int k = 0; k < 4; ++k)
      for (int p = 0; p < 4; ++p) y[240 + 4 * k + p] = digit(qh[p], k);
    scales[b] = f16_to_f32(load_u16(qs + 52));
  }
}

void decode_q2_0(const uint8_t* src, int64_t n, int64_t block, int8_t* values, float* scales) {
  const int64_t bytes = 2 + block / 4;
  for (int64_t b = 0; b < n / block; ++b) {
    const uint8_t* blk = src + b * bytes;
    scales[b] = f16_to_f32(load_u16(blk));
    const uint8_t* qs = blk + 2;
    int8_t* y = values + b * block;
    for (int64_t j = 0; j < block; ++j) y[j] = static_cast<int8_t>(((qs[j / 4] >> (2 * (j % 4))) & 3) - 1);
  }
}

void dequantize_q2_0(const uint8_t* src, int64_t n, int64_t block, float* dst) {
  const int64_t bytes = 2 + block / 4;
  for (int64_t b = 0; b < n / block; ++b) {
    const uint8_t* blk = src + b * bytes;
    const float d = f16_to_f32(load_u16(blk));
    const uint8_t* qs = blk + 2;
    for (int64_t j = 0; j < block; ++j)
      dst[b * block + j] = static_cast<float>(((qs[j / 4] >> (2 * (j % 4))) & 3) - 1) * d;
  }
}

void encode_q2_0(const int8_t* q, const uint16_t* d_f16, int64_t n, int64_t block, uint8_t* dst) {
  const int64_t bytes = 2 + block / 4;
  for (int64_t b = 0; b < n / block; ++b) {
    uint8_t* blk = dst + b * bytes;
    std::memcpy(blk, &d_f16[b], 2);
    std::memset(blk + 2, 0, static_cast<size_t>(block / 4));
    for (int64_t j = 0; j < block; ++j)
      blk[2 + j / 4] |= static_cast<uint8_t>((q[b * block + j] + 1) << (2 * (j % 4)));
  }
}

float decode_i2_s(const uint8_t* src, int64_t n, int8_t* values) {
  for (int64_t b = 0; b < n / kI2sBlock; ++b) {
    const uint8_t* q = src + b * 32;
    int8_t* y = values + b * kI2sBlock;
    for (int g = 0; g < 4; ++g)
      for (int p = 0; p < 32; ++p) y[32 * g + p] = static_cast<int8_t>(((q[p] >> (6 - 2 * g)) & 3) - 1);
  }
  float s;
  std::memcpy(&s, src + n / 4, 4);
  return s;
}

bool gguf_type_is_ternary(uint32_t type) {
  const auto t = static_cast<GgmlType>(type);
  return t == GgmlType::kTQ1_0 || t == GgmlType::kTQ2_0 || t == GgmlType::kI2_S || t == GgmlType::kQ2_0;
}

bool gguf_type_is_supported(uint32_t type) {
  const auto t = static_cast<GgmlType>(type);
  return gguf_type_is_ternary(type) || t == GgmlType::kF32 || t == GgmlType::kF16 || t == GgmlType::kBF16 ||
         t == GgmlType::kQ8_0;
}

std::string gguf_supported_type_names() { return "F32, F16, BF16, Q8_0, TQ1_0, TQ2_0, I2_S, Q2_0"; }

namespace {

[[noreturn]] void unsupported(const GgufTensorInfo& t, const std::string& file) {
  fail("{}: tensor '{}' has type {}, which tritium does not decode (supported: {})", file, t.name,
       ggml_type_name(t.type), gguf_supported_type_names());
}

// Values and scales of a ternary type as decoded, code 3 still present as 2.
GgufTernary decode_ternary_raw(const GgufTensorInfo& t, const std::string& file) {
  const int64_t n = t.numel();
  GgufTernary r;
  r.values.resize(static_cast<size_t>(n));
  switch (static_cast<GgmlType>(t.type)) {
    case GgmlType::kTQ2_0:
    case GgmlType::kTQ1_0:
      r.block = kTQBlock;
      r.scales.resize(static_cast<size_t>(n / kTQBlock));
      (t.type == static_cast<uint32_t>(GgmlType::kTQ2_0) ? decode_tq2_0 : decode_tq1_0)(t.data, n, r.values.data(),
                                                                                         r.scales.data());
      break;
    case GgmlType::kQ2_0:
      r.block = t.block;
      r.scales.resize(static_cast<size_t>(n / t.block));
      decode_q2_0(t.data, n, t.block, r.values.data(), r.scales.data());
      break;
    case GgmlType::kI2_S:
      if (n % kI2sBlock != 0)
        fail("{}: tensor '{}' (I2_S, {}) has {} weights, not a multiple of the 128-weight block", file, t.name,
             t.ne_str(), n);
      r.block = n;
      r.scales = {decode_i2_s(t.data, n, r.values.data())};
      break;
    default: unsupported(t, file);
  }
  return r;
}

}  // namespace

std::vector<float> gguf_tensor_to_f32(const GgufTensorInfo& t, const std::string& file) {
  const int64_t n = t.numel();
  std::vector<float> out(static_cast<size_t>(n));
  switch (static_cast<GgmlType>(t.type)) {
    case GgmlType::kF32:
      if (n > 0) std::memcpy(out.data(), t.data, static_cast<size_t>(n) * 4);  // an empty tensor has no data
      break;
    case GgmlType::kF16:
      for (int64_t i = 0; i < n; ++i) out[i] = f16_to_f32(load_u16(t.data + 2 * i));
      break;
    case GgmlType::kBF16:
      for (int64_t i = 0; i < n; ++i) out[i] = bf16_to_f32(load_u16(t.data + 2 * i));
      break;
    case GgmlType::kQ8_0: dequantize_q8_0(t.data, n, out.data()); break;
    case GgmlType::kQ2_0: dequantize_q2_0(t.data, n, t.block, out.data()); break;
    case GgmlType::kTQ1_0:
    case GgmlType::kTQ2_0:
    case GgmlType::kI2_S: {
      const GgufTernary r = decode_ternary_raw(t, file);
      for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(r.values[i]) * r.scales[i / r.block];
      break;
    }
    default: unsupported(t, file);
  }
  return out;
}

GgufTernary gguf_tensor_to_ternary(const GgufTensorInfo& t, const std::string& file) {
  if (!gguf_type_is_ternary(t.type))
    fail("{}: tensor '{}' has type {}, not a ternary type (TQ1_0, TQ2_0, I2_S, Q2_0)", file, t.name, ggml_type_name(t.type));
  GgufTernary r = decode_ternary_raw(t, file);
  if (r.values.empty()) return r;  // an empty I2_S tensor still stores its scale; there are no weights to check
  for (size_t b = 0; b < r.scales.size(); ++b) {
    if (!std::isfinite(r.scales[b]))
      fail("{}: tensor '{}' ({}): scale {} of block {} is not finite", file, t.name, ggml_type_name(t.type),
           r.scales[b], b);
    int8_t* v = r.values.data() + b * static_cast<size_t>(r.block);
    if (r.scales[b] == 0.0f) {
      std::memset(v, 0, static_cast<size_t>(r.block));
      continue;
    }
    for (int64_t i = 0; i < r.block; ++i)
      if (v[i] == 2)
        fail("{}: tensor '{}' ({}): weight {} has the unused 2-bit code 3 (not a ternary value)", file, t.name,
             ggml_type_name(t.type), static_cast<int64_t>(b) * r.block + i);
  }
  return r;
}

}  // namespace tritium
