// tritium engine: the serving engine's metrics (vLLM's names and meanings): latency histograms, token and
// request counters, and gauges, read as a consistent snapshot by the /metrics exposition.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace tritium {

/// A Prometheus-style histogram: cumulative counts over fixed upper bounds (seconds), plus sum and count.
class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double v);
  const std::vector<double>& bounds() const { return bounds_; }
  /// Cumulative count of observations <= bounds()[i]; index bounds().size() is +Inf (== count()).
  uint64_t cumulative(size_t i) const;
  double sum() const { return sum_; }
  uint64_t count() const { return count_; }

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  ///< per bucket (not cumulative), last = above every bound
  double sum_ = 0;
  uint64_t count_ = 0;
};

/// A snapshot of the engine's metrics.
struct EngineMetrics {
  int64_t num_requests_running = 0;
  int64_t num_requests_waiting = 0;
  double kv_cache_usage_perc = 0;  ///< fraction in [0, 1], as vLLM
  int64_t prompt_tokens_total = 0;
  int64_t generation_tokens_total = 0;
  std::map<std::string, int64_t> request_success_total;  ///< by finished_reason: stop, length, abort, error
  int64_t prefix_cache_queries_total = 0;  ///< tokens looked up in the prefix cache
  int64_t prefix_cache_hits_total = 0;     ///< tokens found
  int64_t num_preemptions_total = 0;
  int64_t num_blocks = 0, block_size = 0;
  // Engine steps that ran a forward, and the wall time of their phases: schedule (admission, scheduling, the batch
  // and its sampling rows), forward (the backend's forward and sampling, waiting for the device), output (the
  // sampled tokens: detokenization, stop checks, the requests' streams). TPOT over the forward's share is the
  // engine's overhead.
  int64_t engine_steps_total = 0;
  double step_schedule_seconds_total = 0, step_forward_seconds_total = 0, step_output_seconds_total = 0;
  Histogram time_to_first_token_seconds{{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0,
                                         2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0}};
  Histogram inter_token_latency_seconds{{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3,
                                         0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 10.0}};
  Histogram e2e_request_latency_seconds{{0.01, 0.05, 0.1, 0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0,
                                         30.0, 40.0, 50.0, 60.0, 120.0}};
  Histogram request_queue_time_seconds{{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5,
                                        5.0, 10.0, 20.0, 40.0, 80.0}};
};

}  // namespace tritium
