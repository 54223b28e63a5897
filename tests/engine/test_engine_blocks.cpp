// Block manager (reference counts, prefix cache hashing, eviction order) and scheduler (budgets, decode first,
// chunked prefill, preemption by recompute) without a model.
#include <gtest/gtest.h>

#include <numeric>

#include "core/error.h"
#include "kv/block_manager.h"
#include "engine/scheduler.h"

using namespace tritium;

namespace {
std::vector<int32_t> iota_tokens(int n, int start = 100) {
  std::vector<int32_t> v(n);
  std::iota(v.begin(), v.end(), start);
  return v;
}
}  // namespace

TEST(EngineBlockManager, AllocateAndFreeCounts) {
  BlockManager bm(8, 4, false);
  SeqBlocks a, b;
  ASSERT_TRUE(bm.allocate(a, 9));  // 3 blocks
  EXPECT_EQ(a.table.size(), 3u);
  EXPECT_EQ(bm.num_free_blocks(), 5);
  EXPECT_TRUE(bm.allocate(a, 12));  // still 3
  EXPECT_EQ(a.table.size(), 3u);
  EXPECT_FALSE(bm.allocate(b, 24));  // 6 > 5: takes nothing
  EXPECT_TRUE(b.table.empty());
  EXPECT_EQ(bm.num_free_blocks(), 5);
  ASSERT_TRUE(bm.allocate(b, 20));
  EXPECT_EQ(bm.num_free_blocks(), 0);
  EXPECT_DOUBLE_EQ(bm.usage(), 1.0);
  for (int32_t blk : a.table) EXPECT_EQ(bm.ref_count(blk), 1);
  bm.free(a);
  bm.free(b);
  EXPECT_EQ(bm.num_free_blocks(), 8);
  EXPECT_DOUBLE_EQ(bm.usage(), 0.0);
  EXPECT_TRUE(a.table.empty());
}

TEST(EngineBlockManager, PrefixCacheSharesFullBlocks) {
  BlockManager bm(16, 4, true);
  const auto toks = iota_tokens(10);  // 2 full blocks + 2 tokens
  SeqBlocks a;
  EXPECT_EQ(bm.acquire_cached_prefix(toks, 9, a), 0);
  ASSERT_TRUE(bm.allocate(a, 10));
  bm.cache_full_blocks(a, toks, 10);
  EXPECT_EQ(bm.num_cached_blocks(), 2);
  EXPECT_EQ(a.hashes.size(), 2u);

  // Same prefix, different tail: the two full blocks are shared.
  auto toks2 = toks;
  toks2[9] = 7;
  toks2.push_back(8);
  SeqBlocks b;
  EXPECT_EQ(bm.acquire_cached_prefix(toks2, static_cast<int64_t>(toks2.size()) - 1, b), 8);
  ASSERT_EQ(b.table.size(), 2u);
  EXPECT_EQ(b.table[0], a.table[0]);
  EXPECT_EQ(b.table[1], a.table[1]);
  EXPECT_EQ(bm.ref_count(a.table[0]), 2);
  EXPECT_EQ(bm.prefix_hit_tokens(), 8);

  // max_tokens caps the hit at whole blocks below it.
  SeqBlocks c;
  EXPECT_EQ(bm.acquire_cached_prefix(toks, 7, c), 4);
  bm.free(c);

  // A different first block shares nothing (the hash chains the parent).
  auto toks3 = toks;
  toks3[0] = 1;
  SeqBlocks d;
  EXPECT_EQ(bm.acquire_cached_prefix(toks3, 9, d), 0);

  const int32_t a0 = a.table[0];
  bm.free(a);
  EXPECT_EQ(bm.ref_count(a0), 1);  // b still holds it
  bm.free(b);
  EXPECT_EQ(bm.num_free_blocks(), 16);
  // Still cached while free: a new sequence revives it.
  SeqBlocks e;
  EXPECT_EQ(bm.acquire_cached_prefix(toks, 9, e), 8);
  EXPECT_EQ(e.table[0], a0);
  EXPECT_EQ(bm.num_free_blocks(), 14);
  bm.free(e);
}

TEST(EngineBlockManager, EvictsUncachedFirstThenLeastRecentTail) {
  BlockManager bm(4, 2, true);
  const auto toks = iota_tokens(4);
  SeqBlocks a;
  ASSERT_TRUE(bm.allocate(a, 4));
  bm.cache_full_blocks(a, toks, 4);
  bm.free(a);  // 2 cached free blocks, 2 never used
  EXPECT_EQ(bm.num_cached_blocks(), 2);
  SeqBlocks b;
  ASSERT_TRUE(bm.allocate(b, 4));  // takes the 2 uncached blocks first
  EXPECT_EQ(bm.num_cached_blocks(), 2);
  SeqBlocks c;
  ASSERT_TRUE(bm.allocate(c, 2));  // must evict one: the tail block of the cached prefix
  EXPECT_EQ(bm.num_cached_blocks(), 1);
  SeqBlocks d;
  EXPECT_EQ(bm.acquire_cached_prefix(toks, 4, d), 2);  // head block still there
  bm.free(b);
  bm.free(c);
  bm.free(d);
  EXPECT_EQ(bm.num_free_blocks(), 4);
}

TEST(EngineBlockManager, HashDependsOnParentAndTokens) {
  const auto t = iota_tokens(4);
  EXPECT_NE(BlockManager::hash_block(0, t), BlockManager::hash_block(1, t));
  auto u = t;
  u[3] += 1;
  EXPECT_NE(BlockManager::hash_block(0, t), BlockManager::hash_block(0, u));
  EXPECT_EQ(BlockManager::hash_block(5, t), BlockManager::hash_block(5, t));
}

// Decode tokens first, then prefill chunks under the token budget; a partial prompt chunk ends at a statistic
// segment boundary (kStatSegment = 16 positions, backend/backend.h), and a prompt that cannot get a whole segment in
// the budget left waits for the next step.
TEST(EngineScheduler, DecodeFirstAndTokenBudget) {
  BlockManager bm(64, 4, false);
  Scheduler s({8, 20}, bm);
  Sequence a, b, c;
  a.id = 1; a.tokens = iota_tokens(6); a.num_prompt = 6;
  b.id = 2; b.tokens = iota_tokens(40); b.num_prompt = 40;
  c.id = 3; c.tokens = iota_tokens(3); c.num_prompt = 3;
  s.add(&a);
  s.add(&b);
  auto o1 = s.schedule();  // a: 6; b would get 14 of 40, no whole segment: it waits
  ASSERT_EQ(o1.chunks.size(), 1u);
  EXPECT_EQ(o1.chunks[0].seq, &a);
  EXPECT_EQ(o1.chunks[0].count, 6);
  EXPECT_EQ(o1.num_tokens, 6);
  s.on_step_done(o1);
  a.tokens.push_back(1);  // a sampled a token
  auto o2 = s.schedule();  // a decode first, then b: 19 left -> positions [0, 16)
  ASSERT_EQ(o2.chunks.size(), 2u);
  EXPECT_EQ(o2.chunks[0].seq, &a);
  EXPECT_EQ(o2.chunks[0].start, 6);
  EXPECT_EQ(o2.chunks[0].count, 1);
  EXPECT_EQ(o2.num_decode, 1);
  EXPECT_EQ(o2.chunks[1].seq, &b);
  EXPECT_EQ(o2.chunks[1].start, 0);
  EXPECT_EQ(o2.chunks[1].count, 16);
  s.on_step_done(o2);
  a.tokens.push_back(1);
  s.add(&c);
  auto o3 = s.schedule();  // a decode, b [16, 32), then c does not fit the 3 tokens left? it does: 3 <= 3
  ASSERT_EQ(o3.chunks.size(), 3u);
  EXPECT_EQ(o3.chunks[1].seq, &b);
  EXPECT_EQ(o3.chunks[1].start, 16);
  EXPECT_EQ(o3.chunks[1].count, 16);
  EXPECT_EQ(o3.chunks[2].seq, &c);
  EXPECT_EQ(o3.chunks[2].count, 3);  // a whole prompt needs no boundary
  EXPECT_EQ(s.num_running(), 3u);
  s.on_step_done(o3);
  a.tokens.push_back(1);
  c.tokens.push_back(1);
  auto o4 = s.schedule();  // a and c decode, b's last 8 positions (the end of its prompt)
  ASSERT_EQ(o4.chunks.size(), 3u);
  EXPECT_EQ(o4.chunks[2].seq, &b);
  EXPECT_EQ(o4.chunks[2].start, 32);
  EXPECT_EQ(o4.chunks[2].count, 8);
  s.on_step_done(o4);
  s.remove(&a);
  s.remove(&b);
  s.remove(&c);
  EXPECT_EQ(bm.num_free_blocks(), 64);
}

TEST(EngineScheduler, MaxNumSeqs) {
  BlockManager bm(64, 4, false);
  Scheduler s({2, 100}, bm);
  Sequence q[3];
  for (int i = 0; i < 3; ++i) {
    q[i].id = i + 1;
    q[i].tokens = iota_tokens(3);
    q[i].num_prompt = 3;
    s.add(&q[i]);
  }
  auto o = s.schedule();
  EXPECT_EQ(o.chunks.size(), 2u);
  EXPECT_EQ(s.num_waiting(), 1u);
  for (auto& x : q) s.remove(&x);
}

TEST(EngineScheduler, PreemptsNewestWhenBlocksRunOut) {
  BlockManager bm(4, 2, false);  // 8 token slots
  Scheduler s({8, 100}, bm);
  Sequence a, b;
  a.id = 1; a.tokens = iota_tokens(4); a.num_prompt = 4;
  b.id = 2; b.tokens = iota_tokens(4); b.num_prompt = 4;
  s.add(&a);
  s.add(&b);
  auto o1 = s.schedule();
  ASSERT_EQ(o1.chunks.size(), 2u);
  EXPECT_EQ(bm.num_free_blocks(), 0);
  s.on_step_done(o1);
  a.tokens.push_back(1);
  b.tokens.push_back(1);
  auto o2 = s.schedule();  // a needs a 3rd block: b (newest) is preempted
  ASSERT_EQ(o2.preempted.size(), 1u);
  EXPECT_EQ(o2.preempted[0], &b);
  ASSERT_EQ(o2.chunks.size(), 1u);
  EXPECT_EQ(o2.chunks[0].seq, &a);
  EXPECT_EQ(b.num_computed, 0);
  EXPECT_EQ(b.num_preemptions, 1);
  EXPECT_EQ(s.num_waiting(), 1u);
  s.on_step_done(o2);
  s.remove(&a);  // a finishes: b resumes with all 5 tokens recomputed
  auto o3 = s.schedule();
  ASSERT_EQ(o3.chunks.size(), 1u);
  EXPECT_EQ(o3.chunks[0].seq, &b);
  EXPECT_EQ(o3.chunks[0].start, 0);
  EXPECT_EQ(o3.chunks[0].count, 5);
  s.remove(&b);
  EXPECT_EQ(bm.num_free_blocks(), 4);
}

TEST(EngineScheduler, UnschedulableWhenLargerThanPool) {
  BlockManager bm(2, 2, false);
  Scheduler s({8, 100}, bm);
  Sequence a;
  a.id = 1; a.tokens = iota_tokens(6); a.num_prompt = 6;
  s.add(&a);
  auto o = s.schedule();
  EXPECT_TRUE(o.chunks.empty());
  ASSERT_EQ(o.unschedulable.size(), 1u);
  EXPECT_FALSE(s.has_work());
}

TEST(EngineScheduler, RejectsBadConfig) {
  BlockManager bm(2, 2, false);
  EXPECT_THROW(Scheduler({0, 10}, bm), Error);
  EXPECT_THROW(Scheduler({1, 0}, bm), Error);
  EXPECT_THROW(BlockManager(0, 16, true), Error);
}
