// tritium engine: the serving engine — continuous batching over a paged, prefix-cached KV cache.
//
// Each step: schedule (engine/scheduler.h) -> one Backend::forward over the mixed batch of decode tokens and
// prefill chunks -> sample the sequences whose last token was computed -> detokenize -> stop checks -> push
// events to each request's stream. With the background loop running, the events of a step go to the requests'
// streams from a second thread (the output thread), so the wake-ups of the readers (one post to the HTTP event loop
// per stream) do not delay the next step. The engine is device-agnostic: it only drives Backend::forward and a
// KvCache. Requests come from any thread (add_request / abort); steps run either on the engine's own background
// thread (start/stop) or synchronously through step() (tests, offline use).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/error.h"
#include "backend/backend.h"
#include "kv/block_manager.h"
#include "engine/engine_metrics.h"
#include "engine/generator.h"
#include "kv/kv_cache.h"
#include "engine/sampler.h"
#include "engine/scheduler.h"
#include "tokenizer/tokenizer.h"

namespace tritium {

struct EngineConfig {
  int block_size = 16;                   ///< tokens per KV block
  int64_t num_blocks = 0;                ///< > 0: exact pool size (tests); else from the memory budget
  size_t kv_cache_memory = 0;            ///< bytes for the KV pool (--kv-cache-memory); 0 = from the budgets below
  /// A GPU backend (Backend::reserve_device_memory): the fraction of the device's memory this engine may use in
  /// all (vLLM's --gpu-memory-utilization); the KV pool gets what the weights and the workspace leave of it.
  double gpu_memory_utilization = 0.9;
  double kv_cache_fraction = 0.10;       ///< host backends: fraction of MemAvailable for the pool
  KvDType kv_dtype = KvDType::kF32;
  float kv_scale = 0.0f;                 ///< fp8/int8 per-tensor scale; 0 = calibrate at start
  bool enable_prefix_caching = true;
  int max_num_seqs = 64;
  int64_t max_num_batched_tokens = 512;
  int64_t max_model_len = 0;             ///< 0 = the model's max_position_embeddings
  int64_t max_pending = 4096;            ///< queued + running requests at most (more -> RequestError kOverloaded)
};

/// A generation request.
struct EngineRequest {
  std::vector<int32_t> prompt;           ///< token ids (BOS included when wanted)
  SamplingParams sampling;
  int64_t max_tokens = 16;               ///< sampled tokens at most (EOS / stop token included); 0: prefill only
  std::vector<std::string> stop;         ///< stop strings (removed from the text)
  std::vector<int32_t> stop_token_ids;   ///< extra stop tokens (finish "stop", not in the text)
  bool ignore_eos = false;
  int logprobs = -1;                     ///< < 0: none; k >= 0: the chosen token's logprob and the top k
  bool skip_special_tokens = true;
  /// Constraints on the sampled tokens (sampler.h TokenConstraints): min_tokens, allowed ids, bad words.
  TokenConstraints constraints;
  /// < 0: none; k >= 0: the logprob of every prompt token after the first (given its prefix) and the top k.
  /// The prompt is then computed in full (no prefix-cache reuse), its logits for every position.
  int prompt_logprobs = -1;
};

/// One token's log-probabilities (natural log of the model's softmax, before penalties and temperature).
struct TokenLogprob {
  int32_t id = 0;
  float logprob = 0;
  int rank = 1;  ///< 1 + the number of tokens with a higher logit
  std::vector<std::pair<int32_t, float>> top;  ///< most likely tokens, best first
};

/// An event of a request: new tokens/text, and at the end finished = true with the reason and usage.
struct RequestOutput {
  std::string text;                 ///< new text since the previous event (stop strings held back/removed)
  std::vector<int32_t> token_ids;   ///< tokens sampled since the previous event
  std::vector<TokenLogprob> logprobs;
  /// EngineRequest::prompt_logprobs >= 0: prompt tokens 1 .. n-1 (token 0 has no prefix), in the first event.
  std::vector<TokenLogprob> prompt_logprobs;
  bool finished = false;
  std::string finish_reason;        ///< "stop", "length", "abort", "error"
  std::string stop_string;          ///< finish_reason "stop" by a stop string: that string ("" otherwise)
  std::string error;                ///< message when finish_reason == "error"
  int64_t prompt_tokens = 0, completion_tokens = 0, cached_tokens = 0;
};

/// The consumer side of a request: a thread-safe event queue filled by the engine.
class RequestHandle {
 public:
  explicit RequestHandle(uint64_t id) : id_(id) {}
  uint64_t id() const { return id_; }
  /// Waits up to `timeout` for the next event; false on timeout.
  bool next(RequestOutput& out, std::chrono::milliseconds timeout);
  /// Drains events until the finished one; returns the concatenation (text, tokens, logprobs) with the final
  /// reason and usage.
  RequestOutput wait_all();
  void push(RequestOutput o);
  /// Calls fn (on the engine's output thread, under the handle's lock: it must only post work elsewhere) after every
  /// push, and once now when events are already waiting. nullptr clears it; after set_notify returns, the old
  /// function is not running and is not called again. For event-driven readers (the HTTP server).
  void set_notify(std::function<void()> fn);

 private:
  uint64_t id_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<RequestOutput> q_;
  std::function<void()> notify_;
};

/// Appends event `ev` of a request to `all` (text, tokens, logprobs; the final reason and usage when finished).
void append_output(RequestOutput& all, RequestOutput&& ev);

/// A rejected request, with the kind that decides the HTTP status.
class RequestError : public Error {
 public:
  enum class Kind { kInvalid /*400*/, kTooLong /*400 context length*/, kOverloaded /*429*/, kUnavailable /*503*/ };
  RequestError(Kind k, const std::string& what) : Error(what), kind_(k) {}
  Kind kind() const { return kind_; }

 private:
  Kind kind_;
};

class Engine {
 public:
  /// Sizes and allocates the KV pool (and calibrates the fp8/int8 scale when kv_scale is 0). The model and
  /// tokenizer must outlive the engine. Throws tritium::Error on an invalid config or a pool under one sequence.
  Engine(Backend& backend, const Tokenizer& tok, EngineConfig cfg);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  /// Queues a request (any thread). Throws RequestError: kInvalid (empty prompt, bad ids or parameters),
  /// kTooLong (prompt + max_tokens past max_model_len, or more than the whole KV pool), kOverloaded (too many
  /// pending requests), kUnavailable (engine stopped or draining).
  std::shared_ptr<RequestHandle> add_request(EngineRequest req);
  /// Cancels a request (any thread): its blocks are freed at the next step boundary and its stream gets a
  /// final event with finish_reason "abort". Unknown or finished ids are ignored.
  void abort(uint64_t id);

  /// Runs one step on the calling thread (only when the background loop is not running). Returns whether
  /// there is still work.
  bool step();
  /// Steps until every request has finished (synchronous use).
  void run_until_idle();
  /// Starts / stops the background step loop. stop() aborts what is still unfinished.
  void start();
  void stop();
  /// Refuses new requests from now on (kUnavailable); running ones go on (graceful shutdown).
  void drain() { draining_ = true; }
  /// Requests not yet finished (queued or running).
  int64_t num_unfinished() const { return unfinished_.load(); }

  EngineMetrics metrics() const;
  const EngineConfig& config() const { return cfg_; }
  const KvCacheSpec& kv_spec() const { return cache_->spec(); }
  int64_t max_model_len() const { return cfg_.max_model_len; }
  /// One line describing the KV pool (blocks, tokens, bytes per token, dtype, scale) for the start-up log.
  std::string kv_summary() const;

 private:
  struct Req;
  void ingest();
  bool step_once();
  void finish(Req& r, const std::string& reason, const std::string& error = {});
  void on_token(Req& r, int32_t tok, TokenLogprob* lp);
  bool grammar_done(Req& r, int32_t tok);
  /// Whether every request of this step can be sampled by the backend on the device: no prompt logprobs, at most
  /// kMaxDeviceTopLogprobs top logprobs, and the backend samples on the device. Token constraints (grammar,
  /// allowed_token_ids, bad_words, min_tokens) go to the device as an allow mask and banned ids.
  bool device_sampling_step(const SchedulerOutput& out) const;
  /// Samples the chunks of a step after the forward on the host (CPU sampler) or from the backend's device results.
  void sample_on_host(const SchedulerOutput& out);
  void sample_on_device(const SchedulerOutput& out, std::vector<SampledToken>& sampled);
  void loop();
  void update_gauges();
  /// Queues an event for a request's stream (engine thread); flush_outbox() hands a step's events on.
  void emit(const std::shared_ptr<RequestHandle>& h, RequestOutput o);
  /// Gives the queued events to the output thread, or pushes them now when the background loop is not running
  /// (step() called synchronously: its events are in the streams when it returns).
  void flush_outbox();
  void output_loop();

  Backend& backend_;
  const Tokenizer& tok_;
  EngineConfig cfg_;
  std::optional<DeviceMemoryInfo> gpu_memory_;  ///< the device's memory when the pool was sized from it
  std::unique_ptr<KvCache> cache_;
  std::unique_ptr<BlockManager> bm_;
  std::unique_ptr<Scheduler> sched_;
  std::vector<int32_t> eos_ids_;

  // Engine-thread state.
  std::unordered_map<uint64_t, std::unique_ptr<Req>> reqs_;
  std::vector<float> logits_;
  std::vector<BatchChunk> batch_;
  std::vector<RowSampling> rows_;          // device sampling: one per chunk
  std::vector<std::vector<int32_t>> bans_;    // banned ids of each row (rows_[i].banned points here)
  std::vector<std::vector<uint64_t>> allows_; // allow mask of each row (rows_[i].allowed points here)
  std::vector<char> no_token_left_;           // the row's constraints exclude every token: it ends with an error
  std::vector<SampledToken> sampled_;
  struct Event {
    std::shared_ptr<RequestHandle> handle;
    RequestOutput out;
  };
  std::vector<Event> outbox_;  // this step's events, in order
  bool async_output_ = false;  // the output thread runs (set by start() before the loop starts, reset by stop())

  // Shared state.
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<Req>> pending_;
  std::vector<uint64_t> aborts_;
  uint64_t next_id_ = 1;
  bool stop_ = false;
  std::atomic<bool> draining_{false};
  std::atomic<int64_t> unfinished_{0};
  std::thread thread_;
  // The output thread: pushes the events the engine thread hands over, in order.
  std::mutex out_mu_;
  std::condition_variable out_cv_;
  std::vector<Event> out_q_;
  bool out_stop_ = false;
  std::thread out_thread_;
  mutable std::mutex metrics_mu_;
  EngineMetrics metrics_;
};

/// Per-tensor fp8/int8 KV scale: runs `tokens` through the model with an f32 cache and returns
/// margin * absmax(K, V over all layers) / qmax (448 for fp8 e4m3, 127 for int8); 1 for float dtypes.
float calibrate_kv_scale(Backend& backend, KvDType dtype, std::span<const int32_t> tokens,
                         float margin = 1.25f);

/// A short built-in English text used to calibrate the KV scale.
const char* kv_calibration_text();

}  // namespace tritium
