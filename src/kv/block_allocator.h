// tritium kv: a free list of KV cache block ids (the simple allocator behind single-sequence generation;
// the serving engine's block manager adds reference counts and prefix caching on top).
#pragma once

#include <cstdint>
#include <vector>

namespace tritium {

class BlockAllocator {
 public:
  explicit BlockAllocator(int64_t num_blocks);
  /// Takes a free block id; returns -1 when none is left.
  int32_t allocate();
  /// Returns a block id to the free list.
  void free(int32_t block);
  int64_t num_free() const { return static_cast<int64_t>(free_.size()); }
  int64_t num_blocks() const { return num_blocks_; }

 private:
  int64_t num_blocks_;
  std::vector<int32_t> free_;
};

/// A sequence's block table grown on demand from an allocator.
struct BlockTable {
  std::vector<int32_t> blocks;
  /// Makes the table cover n_tokens positions. Returns false (allocating nothing) if the pool has too few blocks.
  bool reserve(BlockAllocator& alloc, int64_t n_tokens, int block_size);
  /// Returns every block to the allocator.
  void release(BlockAllocator& alloc);
};

}  // namespace tritium
