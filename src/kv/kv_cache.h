// tritium kv: the paged KV cache (PagedAttention, Kwon et al. 2023).
//
// Storage is a pool of fixed-size blocks of `block_size` token slots. A sequence owns an ordered list of block
// ids (its block table); token position p of the sequence lives in block table[p / block_size], slot
// p % block_size. Per layer there is one K pool and one V pool, each [num_blocks, block_size, kv_dim] where
// kv_dim = num_kv_heads * head_dim, in the cache dtype (f32, f16, bf16, fp8 e4m3 with a per-tensor scale, int8).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string_view>
#include <vector>

namespace tritium {

/// Element type of the KV cache.
enum class KvDType { kF32, kF16, kBF16, kFP8E4M3, kI8 };
std::string_view kv_dtype_name(KvDType t);
/// Parses "f32"/"fp32"/"float32", "f16"/"fp16", "bf16", "fp8"/"fp8_e4m3", "int8"; throws tritium::Error otherwise.
KvDType parse_kv_dtype(std::string_view s);
size_t kv_dtype_size(KvDType t);

struct KvCacheSpec {
  int num_layers = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  int block_size = 16;
  int64_t num_blocks = 0;
  KvDType dtype = KvDType::kF32;
  /// Scale for fp8/int8 storage: stored = value / scale (per tensor, fixed). fp8 e4m3 max is 448.
  float quant_scale = 1.0f;

  int kv_dim() const { return num_kv_heads * head_dim; }
  /// Bytes of K+V for one token across all layers.
  size_t bytes_per_token() const;
  /// Number of blocks that fit in `bytes`.
  static int64_t blocks_for_budget(const KvCacheSpec& s, size_t bytes);
};

class KvCache {
 public:
  explicit KvCache(const KvCacheSpec& spec);

  const KvCacheSpec& spec() const { return spec_; }
  int64_t num_blocks() const { return spec_.num_blocks; }
  int block_size() const { return spec_.block_size; }
  /// Size of the pools. The host pools are allocated at the first write() (calloc: zero pages mapped on first touch),
  /// so a backend that keeps its own device copy (device_state) costs no host memory, and the CPU path's resident
  /// memory grows with the blocks in use, not with the pool.
  size_t bytes() const { return bytes_; }

  /// Writes one token's K and V rows (float32 [kv_dim] each) for `layer` at the slot of `pos` in `block_table`.
  void write(int layer, const int32_t* block_table, int64_t pos, const float* k, const float* v);
  /// Reads positions [0, n) of a sequence into float32 [n, kv_dim] buffers (dequantizing).
  void gather(int layer, const int32_t* block_table, int64_t n, float* k_out, float* v_out) const;

  /// State an accelerator backend keeps with this cache (its own copy of the pool in device memory, same block
  /// ids and block size); released together with the cache.
  std::shared_ptr<void>& device_state() { return device_state_; }

 private:
  uint8_t* slot(int layer, int kv, int64_t block, int64_t offset);
  const uint8_t* slot(int layer, int kv, int64_t block, int64_t offset) const;
  KvCacheSpec spec_;
  size_t row_bytes_;
  struct Free {
    void operator()(uint8_t* p) const noexcept { std::free(p); }
  };
  std::unique_ptr<uint8_t[], Free> data_;  // null until the first write()
  std::once_flag alloc_once_;
  size_t bytes_ = 0;
  std::shared_ptr<void> device_state_;
};

}  // namespace tritium
