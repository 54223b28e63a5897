// tritium bench: a load generator for OpenAI-compatible servers (`tritium bench serve`), with the metric
// definitions of vLLM's benchmark_serving.py: Poisson arrivals at a request rate (or all at once), an optional
// concurrency cap, random token prompts of a fixed length; TTFT, TPOT, ITL, E2EL (mean, median, P99), request
// and token throughput, and goodput against SLOs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tritium::server {

struct BenchServeOptions {
  std::string url = "http://127.0.0.1:8000";  ///< server base URL (no /v1)
  std::string model;                          ///< "" = the first id from /v1/models
  std::string api_key;
  double request_rate = 0;                    ///< requests per second (Poisson); <= 0 = all at once
  int max_concurrency = 0;                    ///< requests in flight at most; 0 = unlimited
  int num_prompts = 100;
  int input_len = 128;
  int output_len = 128;
  int vocab_low = 100, vocab_high = 8000;     ///< random prompt ids are drawn from [low, high)
  uint64_t seed = 0;
  double slo_ttft_ms = 0, slo_tpot_ms = 0, slo_e2el_ms = 0;  ///< goodput SLOs (0 = not used)
};

struct LatencyStats {
  double mean = 0, median = 0, p99 = 0;
};

struct BenchServeResult {
  int completed = 0, failed = 0;
  double duration_s = 0;
  int64_t total_input = 0, total_output = 0;
  double request_throughput = 0, output_throughput = 0, total_token_throughput = 0;
  double goodput = 0;  ///< requests per second meeting every SLO (when SLOs are given)
  LatencyStats ttft_ms, tpot_ms, itl_ms, e2el_ms;
  std::string first_error;
};

/// Runs the benchmark. Throws tritium::Error when the server cannot be reached.
BenchServeResult run_bench_serve(const BenchServeOptions& o);

/// vLLM-style text report of a result.
std::string format_bench_serve(const BenchServeOptions& o, const BenchServeResult& r);

/// Percentile with linear interpolation (numpy's default); 0 for an empty list.
double percentile(std::vector<double> v, double q);

}  // namespace tritium::server
