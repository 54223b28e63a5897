// tritium engine: the continuous-batching scheduler (Orca / vLLM style) over a paged KV cache.
//
// Each step builds one mixed batch under a token budget: first one decode token for every running sequence that
// has finished its prefill, then the next prefill chunks of running sequences (chunked prefill), then new or
// resumed sequences from the waiting queue (FIFO), as long as the batch has room (max_num_batched_tokens,
// max_num_seqs) and the block manager has blocks. When blocks run out for a running sequence, the newest
// running sequence is preempted by recompute: its blocks are freed, its progress reset, and it goes back to the
// front of the waiting queue, to be prefilled again (prompt + tokens generated so far) later.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "kv/block_manager.h"

namespace tritium {

/// The scheduler's view of one sequence. The engine owns the object and appends sampled tokens to `tokens`.
struct Sequence {
  uint64_t id = 0;                ///< unique, increasing with arrival (the preemption order)
  std::vector<int32_t> tokens;    ///< prompt followed by the generated tokens
  int64_t num_prompt = 0;         ///< prompt length
  int64_t num_computed = 0;       ///< leading tokens whose K/V is in the cache
  SeqBlocks blocks;
  int num_preemptions = 0;
  bool running = false;
  bool no_prefix_cache = false;   ///< compute the whole prompt (its logits are wanted at every position)
  int64_t num_tokens() const { return static_cast<int64_t>(tokens.size()); }
};

struct SchedulerConfig {
  int max_num_seqs = 64;                ///< running sequences at most
  int64_t max_num_batched_tokens = 512; ///< tokens per forward step at most
};

/// One chunk of the step: tokens [start, start + count) of seq.
struct ScheduledChunk {
  Sequence* seq = nullptr;
  int64_t start = 0;
  int64_t count = 0;
};

struct SchedulerOutput {
  std::vector<ScheduledChunk> chunks;
  std::vector<Sequence*> preempted;      ///< preempted during this step
  std::vector<Sequence*> unschedulable;  ///< too long for the whole pool: the engine must finish them
  int64_t num_tokens = 0;
  int64_t num_decode = 0, num_prefill_tokens = 0;
};

class Scheduler {
 public:
  /// Throws tritium::Error when a limit is not positive.
  Scheduler(const SchedulerConfig& cfg, BlockManager& blocks);

  /// Appends a new sequence to the waiting queue (num_computed must be 0, no blocks).
  void add(Sequence* seq);
  /// Removes a sequence wherever it is (finished or aborted) and frees its blocks at once.
  void remove(Sequence* seq);
  /// Builds the next step's batch (see the file comment). Chunks list decode chunks first.
  SchedulerOutput schedule();
  /// After the forward pass of `out`: advances num_computed of every scheduled sequence and registers its
  /// newly full blocks in the prefix cache.
  void on_step_done(const SchedulerOutput& out);

  size_t num_running() const { return running_.size(); }
  size_t num_waiting() const { return waiting_.size(); }
  bool has_work() const { return !running_.empty() || !waiting_.empty(); }
  int64_t num_preemptions() const { return preemptions_; }
  const SchedulerConfig& config() const { return cfg_; }

 private:
  /// Tokens of s to compute this step under `budget` (0: none fit); a partial prompt chunk ends at a statistic
  /// segment boundary.
  int64_t chunk_size(const Sequence& s, int64_t budget) const;
  void preempt(Sequence* seq, SchedulerOutput& out);

  SchedulerConfig cfg_;
  BlockManager& bm_;
  std::vector<Sequence*> running_;  ///< in admission order (the back is preempted first)
  std::deque<Sequence*> waiting_;
  int64_t preemptions_ = 0;
};

}  // namespace tritium
