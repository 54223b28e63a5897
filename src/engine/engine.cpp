#include "engine/engine.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>


namespace tritium {

using Clock = std::chrono::steady_clock;

// ---- RequestHandle ---------------------------------------------------------------------------------------------

void RequestHandle::push(RequestOutput o) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    q_.push_back(std::move(o));
    if (notify_) notify_();
  }
  cv_.notify_all();
}

void RequestHandle::set_notify(std::function<void()> fn) {
  std::lock_guard<std::mutex> lk(mu_);
  notify_ = std::move(fn);
  if (notify_ && !q_.empty()) notify_();
}

void append_output(RequestOutput& all, RequestOutput&& ev) {
  all.text += ev.text;
  all.token_ids.insert(all.token_ids.end(), ev.token_ids.begin(), ev.token_ids.end());
  for (auto& l : ev.logprobs) all.logprobs.push_back(std::move(l));
  for (auto& l : ev.prompt_logprobs) all.prompt_logprobs.push_back(std::move(l));
  if (ev.finished) {
    all.finished = true;
    all.finish_reason = std::move(ev.finish_reason);
    all.stop_string = std::move(ev.stop_string);
    all.error = std::move(ev.error);
    all.prompt_tokens = ev.prompt_tokens;
    all.completion_tokens = ev.completion_tokens;
    all.cached_tokens = ev.cached_tokens;
  }
}

bool RequestHandle::next(RequestOutput& out, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lk(mu_);
  if (!cv_.wait_for(lk, timeout, [&] { return !q_.empty(); })) return false;
  out = std::move(q_.front());
  q_.pop_front();
  return true;
}

RequestOutput RequestHandle::wait_all() {
  RequestOutput all, ev;
  while (true) {
    if (!next(ev, std::chrono::milliseconds(1000))) continue;
    const bool last = ev.finished;
    append_output(all, std::move(ev));
    if (last) return all;
  }
}

// ---- calibration ------------------------------------------------------------------------------------------------

const char* kv_calibration_text() {
  return "It was a bright cold day in April, and the clocks were striking thirteen. The old man sat by the fire "
         "and told the children a story about the sea, the ships that sailed upon it, and the storms that came "
         "in the night. \"Where are you going?\" asked the girl. \"To the city,\" he said, \"where the lights "
         "never go out.\" Chapter 1. The house stood at the end of the road, 42 miles from London; its windows "
         "were dark, and nobody had lived there for years.";
}

float calibrate_kv_scale(Backend& backend, KvDType dtype, std::span<const int32_t> tokens, float margin) {
  if (dtype != KvDType::kFP8E4M3 && dtype != KvDType::kI8) return 1.0f;
  const ModelConfig& c = backend.model().config();
  const int64_t n = std::min<int64_t>(static_cast<int64_t>(tokens.size()), c.max_position_embeddings);
  TRITIUM_CHECK(n > 0, "KV scale calibration: no tokens");
  KvCacheSpec spec{c.num_layers, c.num_kv_heads, c.head_dim, 16, (n + 15) / 16};
  KvCache cache(spec);
  std::vector<int32_t> table(static_cast<size_t>(spec.num_blocks));
  for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<int32_t>(i);
  BatchChunk ch{tokens.first(static_cast<size_t>(n)), 0, table, false};
  std::vector<float> logits;
  backend.forward(std::span<const BatchChunk>(&ch, 1), cache, logits);
  std::vector<float> k(static_cast<size_t>(n * spec.kv_dim())), v(k.size());
  float amax = 0;
  for (int l = 0; l < c.num_layers; ++l) {
    backend.read_kv(cache, l, table, n, k.data(), v.data());
    for (size_t i = 0; i < k.size(); ++i) amax = std::max({amax, std::fabs(k[i]), std::fabs(v[i])});
  }
  const float qmax = dtype == KvDType::kFP8E4M3 ? 448.0f : 127.0f;
  return amax > 0 ? margin * amax / qmax : 1.0f;
}

// ---- Engine ------------------------------------------------------------------------------------------------------

struct Engine::Req {
  uint64_t id = 0;
  EngineRequest r;
  Sequence seq;
  std::unique_ptr<Sampler> sampler;
  std::unique_ptr<IncrementalDecoder> detok;
  std::unique_ptr<StopStringFilter> stopper;
  std::shared_ptr<RequestHandle> handle;
  Clock::time_point arrival, last_token;
  bool scheduled_once = false, got_token = false;
  int64_t generated = 0, cached_tokens = 0;
  std::vector<int32_t> output;  ///< sampled ids (incl. a final EOS/stop token)
  std::vector<TokenLogprob> prompt_lps;  ///< EngineRequest::prompt_logprobs: tokens 1 .. n-1 of the prompt
  bool prompt_lps_sent = false;
  int32_t grammar_state = -1;  ///< TokenConstraints::grammar's state after `output`
};

namespace {

constexpr const char* kNoTokenLeft = "allowed_token_ids, bad_words and the output grammar leave no token to sample";

// The logprob of `id` and the top k under raw logits (natural log of the softmax; ties: lower id first).
TokenLogprob token_logprob(std::span<const float> raw, int32_t id, int k) {
  TokenLogprob lp;
  lp.id = id;
  float mx = -INFINITY;
  for (float v : raw) mx = std::max(mx, v);
  double s = 0;
  for (float v : raw) s += std::exp(static_cast<double>(v - mx));
  const float lse = mx + static_cast<float>(std::log(s));
  lp.logprob = raw[id] - lse;
  for (float v : raw) lp.rank += v > raw[id];
  if (k > 0) {
    std::vector<int32_t> idx(raw.size());
    for (size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int32_t>(i);
    const size_t kk = std::min(idx.size(), static_cast<size_t>(k));
    std::partial_sort(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(kk), idx.end(),
                      [&](int32_t a, int32_t b) { return raw[a] > raw[b] || (raw[a] == raw[b] && a < b); });
    for (size_t i = 0; i < kk; ++i) lp.top.emplace_back(idx[i], raw[idx[i]] - lse);
  }
  return lp;
}

}  // namespace

namespace {
size_t mem_available_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  size_t kb = 0;
  std::string unit;
  while (in >> key >> kb >> unit)
    if (key == "MemAvailable:") return kb * 1024;
  return size_t{1} << 30;
}
}  // namespace

Engine::Engine(Backend& backend, const Tokenizer& tok, EngineConfig cfg)
    : backend_(backend), tok_(tok), cfg_(std::move(cfg)) {
  const ModelConfig& c = backend.model().config();
  if (cfg_.max_model_len <= 0 || cfg_.max_model_len > c.max_position_embeddings)
    cfg_.max_model_len = c.max_position_embeddings;
  TRITIUM_CHECK(cfg_.block_size > 0 && cfg_.block_size <= 1024, "engine: block size {} out of range", cfg_.block_size);
  KvCacheSpec spec{c.num_layers, c.num_kv_heads, c.head_dim, cfg_.block_size, 0};
  spec.dtype = cfg_.kv_dtype;
  const int64_t blocks_per_seq = (cfg_.max_model_len + cfg_.block_size - 1) / cfg_.block_size;
  // A GPU backend takes the workspace of its largest step before the pool is sized (and so never grows later).
  const std::optional<DeviceMemoryInfo> dev = backend.reserve_device_memory(
      std::max<int64_t>(cfg_.max_num_batched_tokens, cfg_.max_num_seqs), cfg_.max_num_seqs);
  if (cfg_.num_blocks > 0) {
    spec.num_blocks = cfg_.num_blocks;
  } else if (cfg_.kv_cache_memory > 0) {
    spec.num_blocks = KvCacheSpec::blocks_for_budget(spec, cfg_.kv_cache_memory);
  } else if (dev) {
    // vLLM's --gpu-memory-utilization: the engine may use this fraction of the device in all; the pool gets what
    // the weights and the workspace leave, less a reserve for CUDA graphs and the sampler's buffers.
    const double u = cfg_.gpu_memory_utilization;
    TRITIUM_CHECK(u > 0 && u <= 1, "engine: --gpu-memory-utilization {} must be in (0, 1]", u);
    constexpr double kReserve = 512.0 * (1 << 20);
    const double budget = u * static_cast<double>(dev->total) - static_cast<double>(dev->used) - kReserve;
    TRITIUM_CHECK(budget > 0,
                  "engine: --gpu-memory-utilization {} leaves no KV cache: {:.2f} of the device's {:.2f} GiB are in "
                  "use already (weights, workspace)",
                  u, static_cast<double>(dev->used) / (1 << 30), static_cast<double>(dev->total) / (1 << 30));
    spec.num_blocks = KvCacheSpec::blocks_for_budget(spec, static_cast<size_t>(budget));
    gpu_memory_ = *dev;
  } else {
    TRITIUM_CHECK(cfg_.kv_cache_fraction > 0 && cfg_.kv_cache_fraction <= 1,
                  "engine: kv cache fraction {} must be in (0, 1]", cfg_.kv_cache_fraction);
    const auto budget = static_cast<size_t>(cfg_.kv_cache_fraction * static_cast<double>(mem_available_bytes()));
    // No use in more than every sequence at full length.
    spec.num_blocks = std::min<int64_t>(KvCacheSpec::blocks_for_budget(spec, budget), blocks_per_seq * cfg_.max_num_seqs);
  }
  TRITIUM_CHECK(spec.num_blocks >= 1, "engine: the KV cache budget holds no block of {} tokens ({} bytes per token)",
                cfg_.block_size, spec.bytes_per_token());
  if (cfg_.kv_scale > 0) {
    spec.quant_scale = cfg_.kv_scale;
  } else {
    const std::vector<int32_t> cal = tok.encode(kv_calibration_text(), true);
    spec.quant_scale = calibrate_kv_scale(backend, cfg_.kv_dtype, cal);
  }
  cfg_.kv_scale = spec.quant_scale;
  cfg_.num_blocks = spec.num_blocks;
  cache_ = std::make_unique<KvCache>(spec);
  bm_ = std::make_unique<BlockManager>(spec.num_blocks, cfg_.block_size, cfg_.enable_prefix_caching);
  sched_ = std::make_unique<Scheduler>(SchedulerConfig{cfg_.max_num_seqs, cfg_.max_num_batched_tokens}, *bm_);
  eos_ids_ = c.eos_token_ids;
  if (tok.eos_id() && std::find(eos_ids_.begin(), eos_ids_.end(), *tok.eos_id()) == eos_ids_.end())
    eos_ids_.push_back(*tok.eos_id());
  metrics_.num_blocks = spec.num_blocks;
  metrics_.block_size = cfg_.block_size;
}

Engine::~Engine() { stop(); }

std::string Engine::kv_summary() const {
  const KvCacheSpec& s = cache_->spec();
  const std::string where =
      gpu_memory_ ? fmt::format(" (gpu-memory-utilization {:.2f} of {:.1f} GiB; {:.1f} GiB in use before the pool)",
                                cfg_.gpu_memory_utilization, static_cast<double>(gpu_memory_->total) / (1 << 30),
                                static_cast<double>(gpu_memory_->used) / (1 << 30))
                  : std::string();
  return fmt::format("KV cache: {} blocks x {} tokens = {} tokens, dtype {}{}, {} bytes/token, {:.2f} GiB{}; "
                     "prefix caching {}; max_model_len {}, max_num_seqs {}, max_num_batched_tokens {}",
                     s.num_blocks, s.block_size, s.num_blocks * s.block_size, kv_dtype_name(s.dtype),
                     (s.dtype == KvDType::kFP8E4M3 || s.dtype == KvDType::kI8)
                         ? fmt::format(" (scale {:.4g})", s.quant_scale)
                         : "",
                     s.bytes_per_token(), static_cast<double>(cache_->bytes()) / (1 << 30), where,
                     cfg_.enable_prefix_caching ? "on" : "off", cfg_.max_model_len, cfg_.max_num_seqs,
                     cfg_.max_num_batched_tokens);
}

std::shared_ptr<RequestHandle> Engine::add_request(EngineRequest req) {
  using K = RequestError::Kind;
  if (draining_) throw RequestError(K::kUnavailable, "the server is shutting down");
  const int64_t plen = static_cast<int64_t>(req.prompt.size());
  if (plen == 0) throw RequestError(K::kInvalid, "the prompt is empty");
  const int V = backend_.model().vocab_size();
  for (int32_t t : req.prompt)
    if (t < 0 || t >= V) throw RequestError(K::kInvalid, fmt::format("token id {} is outside the vocabulary of {}", t, V));
  if (req.max_tokens < 0) throw RequestError(K::kInvalid, fmt::format("max_tokens must be at least 0, got {}", req.max_tokens));
  if (plen + req.max_tokens > cfg_.max_model_len)
    throw RequestError(K::kTooLong,
                       fmt::format("This model's maximum context length is {} tokens. However, you requested {} tokens "
                                   "({} in the messages, {} in the completion). Please reduce the length of the "
                                   "messages or completion.",
                                   cfg_.max_model_len, plen + req.max_tokens, plen, req.max_tokens));
  if (bm_->blocks_for(plen + 1) > bm_->num_blocks())
    throw RequestError(K::kTooLong, fmt::format("the prompt of {} tokens does not fit the KV cache of {} tokens", plen,
                                                bm_->num_blocks() * bm_->block_size()));
  const SamplingParams& p = req.sampling;
  if (!(p.temperature >= 0) || !(p.top_p > 0 && p.top_p <= 1) || !(p.min_p >= 0 && p.min_p <= 1) ||
      !(p.repetition_penalty > 0) || !std::isfinite(p.presence_penalty) || !std::isfinite(p.frequency_penalty))
    throw RequestError(K::kInvalid, "sampling parameters out of range");
  for (int32_t t : req.stop_token_ids)
    if (t < 0 || t >= V) throw RequestError(K::kInvalid, fmt::format("stop token id {} is outside the vocabulary", t));
  if (req.logprobs > 20) throw RequestError(K::kInvalid, "logprobs must be at most 20");
  if (req.prompt_logprobs > 20) throw RequestError(K::kInvalid, "prompt_logprobs must be at most 20");
  const TokenConstraints& tc = req.constraints;
  if (tc.min_tokens < 0 || tc.min_tokens > req.max_tokens)
    throw RequestError(K::kInvalid, fmt::format("min_tokens must be in [0, max_tokens = {}], got {}", req.max_tokens,
                                                tc.min_tokens));
  for (int32_t t : tc.allowed_token_ids)
    if (t < 0 || t >= V) throw RequestError(K::kInvalid, fmt::format("allowed token id {} is outside the vocabulary", t));
  for (const auto& w : tc.bad_words)
    for (int32_t t : w)
      if (t < 0 || t >= V) throw RequestError(K::kInvalid, fmt::format("bad word token id {} is outside the vocabulary", t));

  auto r = std::make_unique<Req>();
  r->r = std::move(req);
  r->arrival = Clock::now();
  r->seq.tokens = r->r.prompt;
  r->seq.num_prompt = plen;
  r->seq.no_prefix_cache = r->r.prompt_logprobs >= 0;
  r->sampler = std::make_unique<Sampler>(r->r.sampling);
  r->detok = std::make_unique<IncrementalDecoder>(tok_, r->r.skip_special_tokens);
  r->stopper = std::make_unique<StopStringFilter>(r->r.stop);
  if (r->r.constraints.grammar) r->grammar_state = r->r.constraints.grammar->start();
  std::shared_ptr<RequestHandle> h;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (stop_) throw RequestError(K::kUnavailable, "the engine is stopped");
    if (unfinished_.load() >= cfg_.max_pending)
      throw RequestError(K::kOverloaded, fmt::format("too many requests in flight ({})", unfinished_.load()));
    r->id = next_id_++;
    r->seq.id = r->id;
    h = std::make_shared<RequestHandle>(r->id);
    r->handle = h;
    pending_.push_back(std::move(r));
    ++unfinished_;
  }
  cv_.notify_all();
  return h;
}

void Engine::abort(uint64_t id) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    aborts_.push_back(id);
  }
  cv_.notify_all();
}

void Engine::ingest() {
  std::vector<std::unique_ptr<Req>> incoming;
  std::vector<uint64_t> aborts;
  {
    std::lock_guard<std::mutex> lk(mu_);
    incoming.swap(pending_);
    aborts.swap(aborts_);
  }
  for (auto& r : incoming) {
    Req* p = r.get();
    reqs_.emplace(p->id, std::move(r));
    sched_->add(&p->seq);
  }
  for (uint64_t id : aborts) {
    auto it = reqs_.find(id);
    if (it != reqs_.end()) finish(*it->second, "abort");
  }
}

void Engine::finish(Req& r, const std::string& reason, const std::string& error) {
  sched_->remove(&r.seq);  // frees the blocks at once
  RequestOutput o;
  if (reason != "abort" && reason != "error" && !r.stopper->stopped())
    o.text = r.stopper->push(r.detok->flush()) + r.stopper->flush();
  o.finished = true;
  o.finish_reason = reason;
  if (reason == "stop" && r.stopper->stopped()) o.stop_string = r.stopper->matched();
  o.error = error;
  o.prompt_tokens = r.seq.num_prompt;
  o.completion_tokens = r.generated;
  o.cached_tokens = r.cached_tokens;
  {
    std::lock_guard<std::mutex> lk(metrics_mu_);
    metrics_.e2e_request_latency_seconds.observe(std::chrono::duration<double>(Clock::now() - r.arrival).count());
    ++metrics_.request_success_total[reason];
  }
  emit(r.handle, std::move(o));
  const uint64_t id = r.id;
  reqs_.erase(id);  // destroys r
  // The gauges follow before the count drops: whoever sees no unfinished request also sees its blocks freed.
  update_gauges();
  --unfinished_;
}

// Advances the request's grammar by the token's bytes; true when the output is complete and nothing can extend it
// (the request then ends as if EOS had been sampled, also with ignore_eos).
bool Engine::grammar_done(Req& r, int32_t tok) {
  const auto& g = r.r.constraints.grammar;
  if (!g) return false;
  r.grammar_state = g->advance(r.grammar_state, tok < g->vocab().size() ? g->vocab().bytes(tok) : std::string());
  return g->accepting(r.grammar_state) && !g->can_continue(r.grammar_state);
}

void Engine::on_token(Req& r, int32_t tok, TokenLogprob* lp) {
  const auto now = Clock::now();
  {
    std::lock_guard<std::mutex> lk(metrics_mu_);
    if (!r.got_token) metrics_.time_to_first_token_seconds.observe(std::chrono::duration<double>(now - r.arrival).count());
    else metrics_.inter_token_latency_seconds.observe(std::chrono::duration<double>(now - r.last_token).count());
    ++metrics_.generation_tokens_total;
  }
  r.got_token = true;
  r.last_token = now;
  ++r.generated;
  r.output.push_back(tok);

  RequestOutput o;
  o.token_ids.push_back(tok);
  if (lp) o.logprobs.push_back(std::move(*lp));
  if (!r.prompt_lps_sent) {
    o.prompt_logprobs = std::move(r.prompt_lps);
    r.prompt_lps_sent = true;
  }

  const bool is_eos = !r.r.ignore_eos && std::find(eos_ids_.begin(), eos_ids_.end(), tok) != eos_ids_.end();
  const bool is_stop_tok = std::find(r.r.stop_token_ids.begin(), r.r.stop_token_ids.end(), tok) != r.r.stop_token_ids.end();
  std::string reason;
  if (is_eos || is_stop_tok) {
    reason = "stop";
  } else {
    o.text = r.stopper->push(r.detok->push(tok));
    if (r.stopper->stopped()) reason = "stop";
    else if (grammar_done(r, tok)) reason = "stop";
    else if (r.generated >= r.r.max_tokens || r.seq.num_tokens() + 1 > cfg_.max_model_len) reason = "length";
  }
  if (reason.empty()) {
    r.seq.tokens.push_back(tok);  // fed back next step
    emit(r.handle, std::move(o));
    return;
  }
  // This token's data goes out first, then finish() pushes the closing event (flushed text, reason, usage).
  emit(r.handle, std::move(o));
  finish(r, reason);
}

bool Engine::step() {
  const bool more = step_once();
  flush_outbox();  // the events of the early returns (no chunks, a failed forward)
  return more;
}

bool Engine::step_once() {
  const auto t_begin = Clock::now();
  ingest();
  SchedulerOutput out = sched_->schedule();
  for (Sequence* s : out.unschedulable) {
    auto it = reqs_.find(s->id);
    if (it != reqs_.end()) finish(*it->second, "length");
  }
  if (!out.preempted.empty()) {
    std::lock_guard<std::mutex> lk(metrics_mu_);
    metrics_.num_preemptions_total += static_cast<int64_t>(out.preempted.size());
  }
  if (out.chunks.empty()) {
    update_gauges();
    return sched_->has_work();
  }
  batch_.clear();
  const auto now = Clock::now();
  for (const auto& c : out.chunks) {
    Req& r = *reqs_.at(c.seq->id);
    if (!r.scheduled_once) {
      r.scheduled_once = true;
      r.cached_tokens = c.start;
      std::lock_guard<std::mutex> lk(metrics_mu_);
      metrics_.request_queue_time_seconds.observe(std::chrono::duration<double>(now - r.arrival).count());
      metrics_.prompt_tokens_total += r.seq.num_prompt;
    }
    // Prompt logprobs: every position of a prompt chunk gets logits (once; not again after a preemption).
    const bool all = r.r.prompt_logprobs >= 0 && !r.prompt_lps_sent && c.start + c.count <= c.seq->num_prompt;
    batch_.push_back(BatchChunk{std::span<const int32_t>(c.seq->tokens).subspan(static_cast<size_t>(c.start),
                                                                                static_cast<size_t>(c.count)),
                                c.start, c.seq->blocks.table, all, c.seq->num_prompt});
  }
  const bool on_device = device_sampling_step(out);
  Clock::time_point t_forward;
  try {
    if (on_device) {
      rows_.assign(out.chunks.size(), RowSampling{});
      bans_.resize(out.chunks.size());
      allows_.resize(out.chunks.size());
      no_token_left_.assign(out.chunks.size(), 0);
      std::vector<int32_t> stop_ids;
      for (size_t i = 0; i < out.chunks.size(); ++i) {
        const ScheduledChunk& c = out.chunks[i];
        const Req& r = *reqs_.at(c.seq->id);
        RowSampling& row = rows_[i];
        // Sampled at this step: the chunk computes the sequence's last token.
        row.active = c.start + c.count >= c.seq->num_tokens() && r.r.max_tokens > 0;
        if (!row.active) continue;
        bans_[i].clear();
        allows_[i].clear();
        if (!r.r.constraints.empty()) {
          stop_ids = r.r.stop_token_ids;
          stop_ids.insert(stop_ids.end(), eos_ids_.begin(), eos_ids_.end());
          if (!token_constraint_mask(r.r.constraints, backend_.model().vocab_size(), r.output, stop_ids,
                                     r.grammar_state, allows_[i], bans_[i])) {
            row.active = false;
            no_token_left_[i] = 1;
            continue;
          }
        }
        row.banned = bans_[i];
        row.allowed = allows_[i];
        set_row_rule(r.r.sampling, row);
        row.uniform = is_greedy(r.r.sampling) ? 0.0 : r.sampler->next_uniform();
        row.prompt = std::span<const int32_t>(r.seq.tokens.data(), static_cast<size_t>(r.seq.num_prompt));
        row.output = r.output;
        row.logprobs = r.r.logprobs;
      }
      t_forward = Clock::now();
      backend_.forward_sample(batch_, *cache_, rows_, sampled_);
    } else {
      t_forward = Clock::now();
      backend_.forward(batch_, *cache_, logits_);
    }
  } catch (const std::exception& e) {
    for (const auto& c : out.chunks) {
      auto it = reqs_.find(c.seq->id);
      if (it != reqs_.end()) finish(*it->second, "error", e.what());
    }
    update_gauges();
    return sched_->has_work();
  }
  const auto t_output = Clock::now();
  sched_->on_step_done(out);
  if (on_device) {
    sample_on_device(out, sampled_);
  } else {
    sample_on_host(out);
  }
  flush_outbox();
  {
    using Sec = std::chrono::duration<double>;
    const auto t_end = Clock::now();
    std::lock_guard<std::mutex> lk(metrics_mu_);
    metrics_.prefix_cache_queries_total = bm_->prefix_query_tokens();
    metrics_.prefix_cache_hits_total = bm_->prefix_hit_tokens();
    ++metrics_.engine_steps_total;
    metrics_.step_schedule_seconds_total += Sec(t_forward - t_begin).count();
    metrics_.step_forward_seconds_total += Sec(t_output - t_forward).count();
    metrics_.step_output_seconds_total += Sec(t_end - t_output).count();
  }
  update_gauges();
  return sched_->has_work();
}

void Engine::emit(const std::shared_ptr<RequestHandle>& h, RequestOutput o) {
  outbox_.push_back(Event{h, std::move(o)});
}

void Engine::flush_outbox() {
  if (outbox_.empty()) return;
  if (async_output_) {
    {
      std::lock_guard<std::mutex> lk(out_mu_);
      if (out_q_.empty()) out_q_.swap(outbox_);
      else std::move(outbox_.begin(), outbox_.end(), std::back_inserter(out_q_));
    }
    out_cv_.notify_one();
  } else {
    for (Event& e : outbox_) e.handle->push(std::move(e.out));
  }
  outbox_.clear();
}

void Engine::output_loop() {
  std::vector<Event> batch;
  while (true) {
    {
      std::unique_lock<std::mutex> lk(out_mu_);
      out_cv_.wait(lk, [&] { return out_stop_ || !out_q_.empty(); });
      if (out_q_.empty()) break;  // stopping, and everything was pushed
      batch.swap(out_q_);
    }
    for (Event& e : batch) e.handle->push(std::move(e.out));
    batch.clear();
  }
}

bool Engine::device_sampling_step(const SchedulerOutput& out) const {
  if (!backend_.samples_on_device()) return false;
  for (const auto& c : out.chunks) {
    const Req& r = *reqs_.at(c.seq->id);
    if (r.r.prompt_logprobs >= 0 || r.r.logprobs > kMaxDeviceTopLogprobs) return false;
  }
  return true;
}

void Engine::sample_on_device(const SchedulerOutput& out, std::vector<SampledToken>& sampled) {
  for (size_t i = 0; i < out.chunks.size(); ++i) {
    if (no_token_left_[i]) {
      finish(*reqs_.at(out.chunks[i].seq->id), "error", kNoTokenLeft);
      continue;
    }
    if (!rows_[i].active) {
      Sequence* s = out.chunks[i].seq;
      Req& r = *reqs_.at(s->id);
      if (s->num_computed >= s->num_tokens() && r.r.max_tokens == 0) finish(r, "length");  // prefill only
      continue;
    }
    Req& r = *reqs_.at(out.chunks[i].seq->id);
    SampledToken& t = sampled[i];
    if (r.r.logprobs < 0) {
      on_token(r, t.id, nullptr);
      continue;
    }
    TokenLogprob lp;
    lp.id = t.id;
    lp.logprob = t.logprob;
    lp.rank = t.rank;
    lp.top = std::move(t.top);
    on_token(r, t.id, &lp);
  }
}

void Engine::sample_on_host(const SchedulerOutput& out) {
  const size_t V = static_cast<size_t>(backend_.model().vocab_size());
  std::vector<float> raw;
  size_t row0 = 0;  // first logits row of chunk i
  std::vector<int32_t> stop_ids;
  for (size_t i = 0; i < out.chunks.size(); ++i) {
    const size_t rows = batch_[i].all_logits ? batch_[i].tokens.size() : 1;
    const size_t first_row = row0;
    row0 += rows;
    Sequence* s = out.chunks[i].seq;
    Req& r = *reqs_.at(s->id);
    if (batch_[i].all_logits) {
      // Row j predicts position start + j + 1: the prompt token there, while it is one.
      const int64_t start = out.chunks[i].start;
      for (size_t j = 0; j < rows; ++j) {
        const int64_t p = start + static_cast<int64_t>(j) + 1;
        if (p >= s->num_prompt) break;
        r.prompt_lps.push_back(token_logprob(std::span<const float>(&logits_[(first_row + j) * V], V),
                                             s->tokens[static_cast<size_t>(p)], r.r.prompt_logprobs));
      }
    }
    if (s->num_computed < s->num_tokens()) continue;  // prefill not finished yet
    if (r.r.max_tokens == 0) {  // prefill only (prompt logprobs): no token is sampled
      if (!r.prompt_lps_sent) {
        RequestOutput o;
        o.prompt_logprobs = std::move(r.prompt_lps);
        r.prompt_lps_sent = true;
        emit(r.handle, std::move(o));
      }
      finish(r, "length");
      continue;
    }
    std::span<float> row(&logits_[(first_row + rows - 1) * V], V);
    if (r.r.logprobs >= 0) raw.assign(row.begin(), row.end());
    if (!r.r.constraints.empty()) {
      stop_ids = r.r.stop_token_ids;
      stop_ids.insert(stop_ids.end(), eos_ids_.begin(), eos_ids_.end());
      if (!apply_token_constraints(r.r.constraints, row, r.output, stop_ids, r.grammar_state)) {
        finish(r, "error", kNoTokenLeft);
        continue;
      }
    }
    const std::span<const int32_t> prompt(r.seq.tokens.data(), static_cast<size_t>(r.seq.num_prompt));
    // The sampler sees the generated ids so far (the last sampled one is already in seq.tokens).
    const int32_t tok = r.sampler->sample(row, prompt, r.output);
    TokenLogprob lp;
    if (r.r.logprobs >= 0) lp = token_logprob(raw, tok, r.r.logprobs);
    on_token(r, tok, r.r.logprobs >= 0 ? &lp : nullptr);
  }
}

void Engine::update_gauges() {
  size_t pending;
  {
    std::lock_guard<std::mutex> lk(mu_);
    pending = pending_.size();
  }
  std::lock_guard<std::mutex> lk(metrics_mu_);
  metrics_.num_requests_running = static_cast<int64_t>(sched_->num_running());
  metrics_.num_requests_waiting = static_cast<int64_t>(sched_->num_waiting() + pending);
  metrics_.kv_cache_usage_perc = bm_->usage();
}

EngineMetrics Engine::metrics() const {
  std::lock_guard<std::mutex> lk(metrics_mu_);
  return metrics_;
}

void Engine::run_until_idle() {
  while (true) {
    const bool more = step();
    if (!more && num_unfinished() == 0) break;
  }
}

void Engine::loop() {
  while (true) {
    {
      std::unique_lock<std::mutex> lk(mu_);
      if (!sched_->has_work())
        cv_.wait(lk, [&] { return stop_ || !pending_.empty() || !aborts_.empty(); });
      if (stop_) break;
    }
    step();
  }
  // Abort what is left so no waiter hangs.
  ingest();
  std::vector<uint64_t> ids;
  for (auto& [id, r] : reqs_) ids.push_back(id);
  for (uint64_t id : ids) finish(*reqs_.at(id), "abort");
  flush_outbox();
  update_gauges();
}

void Engine::start() {
  std::lock_guard<std::mutex> lk(mu_);
  if (thread_.joinable()) return;
  stop_ = false;
  out_stop_ = false;
  async_output_ = true;
  out_thread_ = std::thread([this] { output_loop(); });
  thread_ = std::thread([this] { loop(); });
}

void Engine::stop() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (out_thread_.joinable()) {
    {
      std::lock_guard<std::mutex> lk(out_mu_);
      out_stop_ = true;
    }
    out_cv_.notify_one();
    out_thread_.join();  // after the last events (the loop's final aborts) were pushed
  }
  async_output_ = false;
}

}  // namespace tritium
