#include "kv/kv_cache.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/dtype.h"
#include "core/error.h"
#include "kv/fp8.h"

namespace tritium {

std::string_view kv_dtype_name(KvDType t) {
  switch (t) {
    case KvDType::kF32: return "f32";
    case KvDType::kF16: return "f16";
    case KvDType::kBF16: return "bf16";
    case KvDType::kFP8E4M3: return "fp8_e4m3";
    case KvDType::kI8: return "int8";
  }
  return "?";
}

KvDType parse_kv_dtype(std::string_view s) {
  if (s == "f32" || s == "fp32" || s == "float32" || s == "auto") return KvDType::kF32;
  if (s == "f16" || s == "fp16" || s == "float16") return KvDType::kF16;
  if (s == "bf16" || s == "bfloat16") return KvDType::kBF16;
  if (s == "fp8" || s == "fp8_e4m3" || s == "f8_e4m3") return KvDType::kFP8E4M3;
  if (s == "int8" || s == "i8") return KvDType::kI8;
  fail("unknown KV cache dtype '{}' (expected f32, f16, bf16, fp8, int8)", s);
}

size_t kv_dtype_size(KvDType t) {
  switch (t) {
    case KvDType::kF32: return 4;
    case KvDType::kF16: case KvDType::kBF16: return 2;
    case KvDType::kFP8E4M3: case KvDType::kI8: return 1;
  }
  return 4;
}

size_t KvCacheSpec::bytes_per_token() const {
  return static_cast<size_t>(num_layers) * 2 * kv_dim() * kv_dtype_size(dtype);
}

int64_t KvCacheSpec::blocks_for_budget(const KvCacheSpec& s, size_t bytes) {
  const size_t per_block = s.bytes_per_token() * s.block_size;
  return per_block ? static_cast<int64_t>(bytes / per_block) : 0;
}

KvCache::KvCache(const KvCacheSpec& spec) : spec_(spec) {
  TRITIUM_CHECK(spec.num_blocks > 0 && spec.block_size > 0 && spec.num_layers > 0 && spec.kv_dim() > 0,
                "KV cache: invalid spec ({} blocks of {} tokens)", spec.num_blocks, spec.block_size);
  row_bytes_ = spec.kv_dim() * kv_dtype_size(spec.dtype);
  bytes_ = static_cast<size_t>(spec.num_layers) * 2 * spec.num_blocks * spec.block_size * row_bytes_;
}

uint8_t* KvCache::slot(int layer, int kv, int64_t block, int64_t offset) {
  return data_.get() + ((((static_cast<size_t>(layer) * 2 + kv) * spec_.num_blocks + block) * spec_.block_size +
                          offset) * row_bytes_);
}
const uint8_t* KvCache::slot(int layer, int kv, int64_t block, int64_t offset) const {
  return const_cast<KvCache*>(this)->slot(layer, kv, block, offset);
}

namespace {
void store_row(KvDType t, float scale, const float* src, uint8_t* dst, int n) {
  switch (t) {
    case KvDType::kF32: std::memcpy(dst, src, n * 4); return;
    case KvDType::kF16:
      for (int i = 0; i < n; ++i) { uint16_t h = f32_to_f16(src[i]); std::memcpy(dst + 2 * i, &h, 2); }
      return;
    case KvDType::kBF16:
      for (int i = 0; i < n; ++i) { uint16_t h = f32_to_bf16(src[i]); std::memcpy(dst + 2 * i, &h, 2); }
      return;
    case KvDType::kFP8E4M3:
      for (int i = 0; i < n; ++i) dst[i] = f32_to_fp8_e4m3(src[i] / scale);
      return;
    case KvDType::kI8:
      for (int i = 0; i < n; ++i) {
        const float r = std::nearbyint(src[i] / scale);
        dst[i] = static_cast<uint8_t>(static_cast<int8_t>(std::clamp(r, -127.0f, 127.0f)));
      }
      return;
  }
}

void load_row(KvDType t, float scale, const uint8_t* src, float* dst, int n) {
  switch (t) {
    case KvDType::kF32: std::memcpy(dst, src, n * 4); return;
    case KvDType::kF16:
      for (int i = 0; i < n; ++i) { uint16_t h; std::memcpy(&h, src + 2 * i, 2); dst[i] = f16_to_f32(h); }
      return;
    case KvDType::kBF16:
      for (int i = 0; i < n; ++i) { uint16_t h; std::memcpy(&h, src + 2 * i, 2); dst[i] = bf16_to_f32(h); }
      return;
    case KvDType::kFP8E4M3:
      for (int i = 0; i < n; ++i) dst[i] = fp8_e4m3_to_f32(src[i]) * scale;
      return;
    case KvDType::kI8:
      for (int i = 0; i < n; ++i) dst[i] = static_cast<float>(static_cast<int8_t>(src[i])) * scale;
      return;
  }
}
}  // namespace

void KvCache::write(int layer, const int32_t* block_table, int64_t pos, const float* k, const float* v) {
  const int64_t block = block_table[pos / spec_.block_size];
  const int64_t off = pos % spec_.block_size;
  TRITIUM_CHECK(block >= 0 && block < spec_.num_blocks, "KV cache: block id {} out of range", block);
  std::call_once(alloc_once_, [this] { data_.reset(static_cast<uint8_t*>(std::calloc(bytes_, 1))); });
  TRITIUM_CHECK(data_ != nullptr, "KV cache: cannot allocate {} bytes of host memory", bytes_);
  store_row(spec_.dtype, spec_.quant_scale, k, slot(layer, 0, block, off), spec_.kv_dim());
  store_row(spec_.dtype, spec_.quant_scale, v, slot(layer, 1, block, off), spec_.kv_dim());
}

void KvCache::gather(int layer, const int32_t* block_table, int64_t n, float* k_out, float* v_out) const {
  const int d = spec_.kv_dim();
  if (!data_) {  // nothing written yet: every element is zero
    std::fill(k_out, k_out + n * d, 0.0f);
    std::fill(v_out, v_out + n * d, 0.0f);
    return;
  }
  for (int64_t p = 0; p < n; ++p) {
    const int64_t block = block_table[p / spec_.block_size];
    const int64_t off = p % spec_.block_size;
    load_row(spec_.dtype, spec_.quant_scale, slot(layer, 0, block, off), k_out + p * d, d);
    load_row(spec_.dtype, spec_.quant_scale, slot(layer, 1, block, off), v_out + p * d, d);
  }
}

}  // namespace tritium
