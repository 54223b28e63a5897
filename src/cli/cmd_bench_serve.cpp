// tritium bench serve: load benchmark of an OpenAI-compatible server (vLLM benchmark_serving definitions).
// A nested subcommand of `tritium bench` (cmd_bench.cpp attaches it with add_bench_serve).
#include <fmt/format.h>

#include <cstdio>

#include "cli/bench_serve.h"
#include "bench/serve_client.h"

namespace tritium::cli {

std::function<int()> add_bench_serve(CLI::App* bench, CLI::App** out_sub) {
  auto o = std::make_shared<server::BenchServeOptions>();
  CLI::App* sub = bench->add_subcommand("serve", "Load benchmark of a running server: TTFT, TPOT, ITL, throughput");
  sub->add_option("--url", o->url, "server base URL (default http://127.0.0.1:8000)");
  sub->add_option("--model", o->model, "model id (default: the first of /v1/models)");
  sub->add_option("--api-key", o->api_key, "API key");
  sub->add_option("--request-rate", o->request_rate, "requests per second, Poisson arrivals (default: all at once)");
  sub->add_option("--max-concurrency", o->max_concurrency, "requests in flight at most")->check(CLI::Range(0, 1 << 16));
  sub->add_option("--num-prompts", o->num_prompts, "number of requests")->check(CLI::Range(1, 1 << 20));
  sub->add_option("--input-len", o->input_len, "prompt tokens (random ids)")->check(CLI::Range(1, 1 << 20));
  sub->add_option("--output-len", o->output_len, "generated tokens per request (EOS ignored)")->check(CLI::Range(1, 1 << 20));
  sub->add_option("--seed", o->seed, "RNG seed for prompts and arrivals");
  sub->add_option("--slo-ttft-ms", o->slo_ttft_ms, "goodput SLO on TTFT (ms)");
  sub->add_option("--slo-tpot-ms", o->slo_tpot_ms, "goodput SLO on TPOT (ms)");
  sub->add_option("--slo-e2el-ms", o->slo_e2el_ms, "goodput SLO on end-to-end latency (ms)");
  *out_sub = sub;
  return [o] {
    const server::BenchServeResult r = server::run_bench_serve(*o);
    std::fputs(server::format_bench_serve(*o, r).c_str(), stdout);
    return r.failed == 0 ? 0 : 1;
  };
}

}  // namespace tritium::cli
