// tritium kv: the serving engine's KV block manager — reference-counted blocks of a paged KV cache
// (PagedAttention, Kwon et al. 2023) with automatic prefix caching (vLLM v1 style).
//
// Every block holds block_size token slots. A sequence's blocks are listed in its SeqBlocks table. A full block
// whose tokens are computed can be registered in the prefix cache under a chained hash of (parent block's hash,
// its tokens); a later sequence with the same token prefix takes those blocks (reference count + 1) instead of
// recomputing them. Free blocks sit in an eviction queue: blocks without a hash at the front (reused first),
// cached blocks at the back in least-recently-freed order; taking a cached free block evicts its hash.
#pragma once

#include <cstdint>
#include <list>
#include <span>
#include <unordered_map>
#include <vector>

namespace tritium {

/// The blocks of one sequence (its block table) and how many leading full blocks are registered in the
/// prefix cache.
struct SeqBlocks {
  std::vector<int32_t> table;
  std::vector<uint64_t> hashes;  ///< hash of each registered leading full block (hashes.size() <= table.size())
};

class BlockManager {
 public:
  /// num_blocks > 0 blocks of block_size > 0 tokens. Throws tritium::Error on invalid sizes.
  BlockManager(int64_t num_blocks, int block_size, bool enable_prefix_caching);

  int64_t num_blocks() const { return num_blocks_; }
  int block_size() const { return block_size_; }
  bool prefix_caching() const { return prefix_caching_; }
  /// Blocks no sequence references (including evictable cached blocks).
  int64_t num_free_blocks() const { return static_cast<int64_t>(free_.size()); }
  /// Fraction of blocks referenced by some sequence, in [0, 1] (vLLM's kv_cache_usage_perc).
  double usage() const { return 1.0 - static_cast<double>(free_.size()) / static_cast<double>(num_blocks_); }
  /// Blocks needed to hold n_tokens positions.
  int64_t blocks_for(int64_t n_tokens) const { return (n_tokens + block_size_ - 1) / block_size_; }

  /// For a sequence that holds no blocks yet: takes the longest run of cached full blocks that match
  /// tokens[0, k * block_size) with k * block_size <= max_tokens, appends them to seq.table (reference
  /// counts + 1) and returns k * block_size, the number of tokens whose KV is already computed. Returns 0 when
  /// prefix caching is off. Counts queried and hit tokens for the metrics.
  int64_t acquire_cached_prefix(std::span<const int32_t> tokens, int64_t max_tokens, SeqBlocks& seq);

  /// Grows seq.table to cover n_tokens positions with fresh blocks. Returns false, taking nothing, when too few
  /// blocks are free.
  bool allocate(SeqBlocks& seq, int64_t n_tokens);

  /// Registers the full blocks of seq covering computed positions [0, n_computed) (tokens: the sequence's
  /// tokens, at least n_computed of them) in the prefix cache. A block whose hash is already cached by another
  /// block stays private. No-op when prefix caching is off.
  void cache_full_blocks(SeqBlocks& seq, std::span<const int32_t> tokens, int64_t n_computed);

  /// Drops the sequence's references (last block first, so a prefix's tail is evicted before its head) and
  /// clears seq.
  void free(SeqBlocks& seq);

  /// Reference count of a block (tests).
  int ref_count(int32_t block) const { return blocks_[block].ref; }
  /// Number of blocks registered in the prefix cache (tests, metrics).
  int64_t num_cached_blocks() const { return static_cast<int64_t>(cache_.size()); }
  /// Prefix cache queries and hits, in tokens (vLLM's prefix_cache_queries / prefix_cache_hits).
  int64_t prefix_query_tokens() const { return query_tokens_; }
  int64_t prefix_hit_tokens() const { return hit_tokens_; }

  /// The chained hash of one full block: parent's hash (0 for the first block) and its tokens.
  static uint64_t hash_block(uint64_t parent, std::span<const int32_t> tokens);

 private:
  struct Block {
    int ref = 0;
    bool cached = false;
    uint64_t hash = 0, parent = 0;
    std::vector<int32_t> tokens;         ///< the block's tokens while cached (hash collisions are verified)
    std::list<int32_t>::iterator where;  ///< position in free_ while ref == 0
  };
  int32_t take_free();
  void take_ref(int32_t b);

  int64_t num_blocks_;
  int block_size_;
  bool prefix_caching_;
  std::vector<Block> blocks_;
  std::list<int32_t> free_;  ///< eviction order: front is reused first
  std::unordered_map<uint64_t, int32_t> cache_;
  int64_t query_tokens_ = 0, hit_tokens_ = 0;
};

}  // namespace tritium
