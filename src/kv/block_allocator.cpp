#include "kv/block_allocator.h"

#include "core/error.h"

namespace tritium {

BlockAllocator::BlockAllocator(int64_t num_blocks) : num_blocks_(num_blocks) {
  free_.reserve(static_cast<size_t>(num_blocks));
  for (int64_t b = num_blocks - 1; b >= 0; --b) free_.push_back(static_cast<int32_t>(b));
}

int32_t BlockAllocator::allocate() {
  if (free_.empty()) return -1;
  int32_t b = free_.back();
  free_.pop_back();
  return b;
}

void BlockAllocator::free(int32_t block) {
  TRITIUM_CHECK(block >= 0 && block < num_blocks_, "BlockAllocator: block {} out of range", block);
  free_.push_back(block);
}

bool BlockTable::reserve(BlockAllocator& alloc, int64_t n_tokens, int block_size) {
  const int64_t need = (n_tokens + block_size - 1) / block_size - static_cast<int64_t>(blocks.size());
  if (need <= 0) return true;
  if (need > alloc.num_free()) return false;
  for (int64_t i = 0; i < need; ++i) blocks.push_back(alloc.allocate());
  return true;
}

void BlockTable::release(BlockAllocator& alloc) {
  for (int32_t b : blocks) alloc.free(b);
  blocks.clear();
}

}  // namespace tritium
