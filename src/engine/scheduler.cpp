#include "engine/scheduler.h"

#include <algorithm>
#include <unordered_set>

#include "backend/backend.h"
#include "core/error.h"

namespace tritium {

Scheduler::Scheduler(const SchedulerConfig& cfg, BlockManager& blocks) : cfg_(cfg), bm_(blocks) {
  TRITIUM_CHECK(cfg.max_num_seqs > 0, "scheduler: max_num_seqs must be positive, got {}", cfg.max_num_seqs);
  TRITIUM_CHECK(cfg.max_num_batched_tokens >= kStatSegment,
                "scheduler: max_num_batched_tokens must be at least {} (one statistic segment), got {}", kStatSegment,
                cfg.max_num_batched_tokens);
}

void Scheduler::add(Sequence* seq) {
  TRITIUM_CHECK(seq->num_computed == 0 && seq->blocks.table.empty() && !seq->tokens.empty(),
                "scheduler: a new sequence must be empty of cache state and hold tokens");
  seq->running = false;
  waiting_.push_back(seq);
}

void Scheduler::remove(Sequence* seq) {
  auto r = std::find(running_.begin(), running_.end(), seq);
  if (r != running_.end()) running_.erase(r);
  auto w = std::find(waiting_.begin(), waiting_.end(), seq);
  if (w != waiting_.end()) waiting_.erase(w);
  bm_.free(seq->blocks);
  seq->running = false;
}

void Scheduler::preempt(Sequence* seq, SchedulerOutput& out) {
  auto r = std::find(running_.begin(), running_.end(), seq);
  if (r != running_.end()) running_.erase(r);
  bm_.free(seq->blocks);
  seq->num_computed = 0;
  seq->running = false;
  ++seq->num_preemptions;
  ++preemptions_;
  waiting_.push_front(seq);
  out.preempted.push_back(seq);
}

int64_t Scheduler::chunk_size(const Sequence& s, int64_t budget) const {
  const int64_t left = s.num_tokens() - s.num_computed;
  if (left <= budget) return left;
  // A partial chunk ends at a statistic segment boundary of the prompt (backend/backend.h), so that every segment
  // is computed in one forward; past the prompt every token is a segment of its own.
  const int64_t end = s.num_computed + budget;
  if (end > s.num_prompt) return budget;
  const int64_t aligned = end / kStatSegment * kStatSegment;
  return aligned > s.num_computed ? aligned - s.num_computed : 0;
}

SchedulerOutput Scheduler::schedule() {
  SchedulerOutput out;
  int64_t budget = cfg_.max_num_batched_tokens;
  std::unordered_set<Sequence*> scheduled;

  // Running sequences: decode first, then prefill chunks, each group in admission order.
  std::vector<Sequence*> order;
  for (Sequence* s : running_)
    if (s->num_tokens() - s->num_computed == 1) order.push_back(s);
  for (Sequence* s : running_)
    if (s->num_tokens() - s->num_computed > 1) order.push_back(s);
  for (Sequence* s : order) {
    if (budget <= 0) break;
    if (!s->running) continue;  // preempted earlier in this loop
    const int64_t n = chunk_size(*s, budget);
    if (n == 0) continue;  // the budget left holds no whole statistic segment
    if (bm_.blocks_for(s->num_computed + n) > bm_.num_blocks()) {  // outgrew the whole pool
      remove(s);
      s->num_computed = 0;
      out.unschedulable.push_back(s);
      continue;
    }
    bool ok = true;
    while (!bm_.allocate(s->blocks, s->num_computed + n)) {
      // Preempt the newest running sequence not yet in this batch (possibly s itself).
      Sequence* victim = nullptr;
      for (auto it = running_.rbegin(); it != running_.rend(); ++it)
        if (!scheduled.count(*it)) { victim = *it; break; }
      preempt(victim, out);
      if (victim == s) { ok = false; break; }
    }
    if (!ok) continue;
    scheduled.insert(s);
    out.chunks.push_back({s, s->num_computed, n});
    budget -= n;
    out.num_tokens += n;
    if (n == 1 && s->num_computed + 1 == s->num_tokens()) ++out.num_decode;
    else out.num_prefill_tokens += n;
  }

  // Waiting sequences (new, or preempted ones at the front), unless something was preempted this step.
  while (out.preempted.empty() && budget > 0 && !waiting_.empty() &&
         static_cast<int>(running_.size()) < cfg_.max_num_seqs) {
    Sequence* s = waiting_.front();
    if (s->blocks.table.empty() && !s->no_prefix_cache) {
      // The last token is always computed (its logits are needed), and the prompt segment that holds it is
      // computed whole (its statistics, backend/backend.h): a hit ends at the last segment boundary before it.
      const int64_t last = s->num_tokens() - 1;
      s->num_computed = bm_.acquire_cached_prefix(s->tokens, last / kStatSegment * kStatSegment, s->blocks);
      if (s->num_computed % kStatSegment != 0) {  // blocks smaller than a segment: back off to a segment boundary
        bm_.free(s->blocks);
        s->num_computed = bm_.acquire_cached_prefix(s->tokens, s->num_computed / kStatSegment * kStatSegment, s->blocks);
      }
    }
    const int64_t n = chunk_size(*s, budget);
    if (n == 0) break;  // FIFO: wait for a step with room for a whole statistic segment
    if (!bm_.allocate(s->blocks, s->num_computed + n)) {
      if (bm_.blocks_for(s->num_tokens()) > bm_.num_blocks()) {  // can never fit, even alone
        waiting_.pop_front();
        bm_.free(s->blocks);
        s->num_computed = 0;
        out.unschedulable.push_back(s);
        continue;
      }
      bm_.free(s->blocks);  // give back the prefix blocks; retry next step
      s->num_computed = 0;
      break;
    }
    waiting_.pop_front();
    s->running = true;
    running_.push_back(s);
    out.chunks.push_back({s, s->num_computed, n});
    budget -= n;
    out.num_tokens += n;
    out.num_prefill_tokens += n;
  }
  return out;
}

void Scheduler::on_step_done(const SchedulerOutput& out) {
  for (const auto& c : out.chunks) {
    Sequence* s = c.seq;
    s->num_computed = c.start + c.count;
    bm_.cache_full_blocks(s->blocks, s->tokens, s->num_computed);
  }
}

}  // namespace tritium
