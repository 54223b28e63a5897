#include "kv/block_manager.h"

#include <algorithm>

#include "core/error.h"
#include "core/rng.h"

namespace tritium {

BlockManager::BlockManager(int64_t num_blocks, int block_size, bool enable_prefix_caching)
    : num_blocks_(num_blocks), block_size_(block_size), prefix_caching_(enable_prefix_caching) {
  TRITIUM_CHECK(num_blocks > 0 && num_blocks <= INT32_MAX, "BlockManager: invalid number of blocks {}", num_blocks);
  TRITIUM_CHECK(block_size > 0, "BlockManager: invalid block size {}", block_size);
  blocks_.resize(static_cast<size_t>(num_blocks));
  for (int64_t b = 0; b < num_blocks; ++b) {
    free_.push_back(static_cast<int32_t>(b));
    blocks_[b].where = std::prev(free_.end());
  }
}

uint64_t BlockManager::hash_block(uint64_t parent, std::span<const int32_t> tokens) {
  // SplitMix64 mixing of the parent hash and every token (64-bit; collisions are checked on lookup).
  uint64_t h = splitmix64(parent ^ 0x5851f42d4c957f2dULL);
  for (int32_t t : tokens) h = splitmix64(h ^ static_cast<uint32_t>(t));
  return h == 0 ? 1 : h;
}

int32_t BlockManager::take_free() {
  const int32_t b = free_.front();
  free_.pop_front();
  Block& blk = blocks_[b];
  if (blk.cached) {  // evict
    cache_.erase(blk.hash);
    blk.cached = false;
    blk.tokens.clear();
  }
  blk.ref = 1;
  return b;
}

void BlockManager::take_ref(int32_t b) {
  Block& blk = blocks_[b];
  if (blk.ref == 0) free_.erase(blk.where);
  ++blk.ref;
}

int64_t BlockManager::acquire_cached_prefix(std::span<const int32_t> tokens, int64_t max_tokens, SeqBlocks& seq) {
  TRITIUM_CHECK(seq.table.empty(), "BlockManager: prefix lookup for a sequence that already holds blocks");
  if (!prefix_caching_) return 0;
  const int64_t limit = std::min<int64_t>(max_tokens, static_cast<int64_t>(tokens.size()));
  query_tokens_ += std::max<int64_t>(limit, 0);
  uint64_t parent = 0;
  int64_t n = 0;
  while (n + block_size_ <= limit) {
    const auto blk_tokens = tokens.subspan(static_cast<size_t>(n), static_cast<size_t>(block_size_));
    const uint64_t h = hash_block(parent, blk_tokens);
    auto it = cache_.find(h);
    if (it == cache_.end()) break;
    const Block& blk = blocks_[it->second];
    if (blk.parent != parent || !std::equal(blk.tokens.begin(), blk.tokens.end(), blk_tokens.begin())) break;
    take_ref(it->second);
    seq.table.push_back(it->second);
    seq.hashes.push_back(h);
    parent = h;
    n += block_size_;
  }
  hit_tokens_ += n;
  return n;
}

bool BlockManager::allocate(SeqBlocks& seq, int64_t n_tokens) {
  const int64_t need = blocks_for(n_tokens) - static_cast<int64_t>(seq.table.size());
  if (need <= 0) return true;
  if (need > num_free_blocks()) return false;
  for (int64_t i = 0; i < need; ++i) seq.table.push_back(take_free());
  return true;
}

void BlockManager::cache_full_blocks(SeqBlocks& seq, std::span<const int32_t> tokens, int64_t n_computed) {
  if (!prefix_caching_) return;
  const int64_t full = std::min<int64_t>(n_computed / block_size_, static_cast<int64_t>(seq.table.size()));
  while (static_cast<int64_t>(seq.hashes.size()) < full) {
    const size_t i = seq.hashes.size();
    const uint64_t parent = i == 0 ? 0 : seq.hashes[i - 1];
    const auto blk_tokens = tokens.subspan(i * static_cast<size_t>(block_size_), static_cast<size_t>(block_size_));
    const uint64_t h = hash_block(parent, blk_tokens);
    seq.hashes.push_back(h);
    const int32_t b = seq.table[i];
    Block& blk = blocks_[b];
    if (blk.cached || cache_.count(h)) continue;  // already registered (shared) or a duplicate stays private
    blk.cached = true;
    blk.hash = h;
    blk.parent = parent;
    blk.tokens.assign(blk_tokens.begin(), blk_tokens.end());
    cache_.emplace(h, b);
  }
}

void BlockManager::free(SeqBlocks& seq) {
  for (auto it = seq.table.rbegin(); it != seq.table.rend(); ++it) {
    Block& blk = blocks_[*it];
    TRITIUM_CHECK(blk.ref > 0, "BlockManager: block {} freed more often than taken", *it);
    if (--blk.ref == 0) {
      if (blk.cached) {
        free_.push_back(*it);
        blk.where = std::prev(free_.end());
      } else {
        free_.push_front(*it);
        blk.where = free_.begin();
      }
    }
  }
  seq.table.clear();
  seq.hashes.clear();
}

}  // namespace tritium
