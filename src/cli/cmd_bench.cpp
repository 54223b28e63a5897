// tritium bench: llama-bench style prompt processing (pp) and text generation (tg) throughput, with the
// decode roofline (weight bytes per token / read bandwidth measured in the same run).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <random>

#include "cli/bench_serve.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "core/error.h"
#include "core/parallel.h"
#include "eval/memory_bandwidth.h"
#include "kv/block_allocator.h"

namespace tritium::cli {
namespace {

struct BenchArgs {
  ModelOptions model;
  int pp = 512;
  int tg = 128;
  int reps = 3;
  bool no_roofline = false;
};

struct Stat {
  double mean = 0, sd = 0, median = 0;
};

Stat stats(const std::vector<double>& v) {
  Stat s;
  for (double x : v) s.mean += x;
  s.mean /= static_cast<double>(v.size());
  for (double x : v) s.sd += (x - s.mean) * (x - s.mean);
  s.sd = v.size() > 1 ? std::sqrt(s.sd / static_cast<double>(v.size() - 1)) : 0;
  std::vector<double> sorted = v;
  std::sort(sorted.begin(), sorted.end());
  const size_t n = sorted.size();
  s.median = n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
  return s;
}

int run(const BenchArgs& a) {
  // Either test may be skipped (0, as llama-bench), not both: there would be nothing to measure.
  if (a.pp == 0 && a.tg == 0) fail("bench: nothing to measure: -p/--n-prompt and -n/--n-gen are both 0");
  LoadedModel lm = load_model(a.model, false);
  const Transformer& model = lm.model();
  Backend& be = *lm.backend;
  const ModelConfig& c = model.config();
  const int total = std::max(a.pp, a.tg);
  if (total > c.max_position_embeddings)
    fail("bench: {} tokens exceed the model context of {}", total, c.max_position_embeddings);
  KvCacheSpec spec{c.num_layers, c.num_kv_heads, c.head_dim, 16, (total + 15) / 16};
  KvCache cache(spec);
  BlockAllocator alloc(spec.num_blocks);
  BlockTable bt;
  bt.reserve(alloc, total, spec.block_size);
  std::mt19937 rng(42);
  std::uniform_int_distribution<int32_t> tok(0, c.vocab_size - 1);
  std::vector<float> logits;
  using clock = std::chrono::steady_clock;

  std::vector<double> pp_ts, tg_ts;
  for (int r = 0; r < a.reps + 1; ++r) {  // first repetition is a warm-up
    if (a.pp > 0) {
      std::vector<int32_t> ids(a.pp);
      for (auto& i : ids) i = tok(rng);
      BatchChunk ch{ids, 0, bt.blocks, false};
      const auto t0 = clock::now();
      be.forward(std::span<const BatchChunk>(&ch, 1), cache, logits);
      const double s = std::chrono::duration<double>(clock::now() - t0).count();
      if (r > 0) pp_ts.push_back(a.pp / s);
    }
    if (a.tg > 0) {
      const auto t0 = clock::now();
      for (int p = 0; p < a.tg; ++p) {
        const int32_t t = tok(rng);
        BatchChunk ch{std::span<const int32_t>(&t, 1), p, bt.blocks, false};
        be.forward(std::span<const BatchChunk>(&ch, 1), cache, logits);
      }
      const double s = std::chrono::duration<double>(clock::now() - t0).count();
      if (r > 0) tg_ts.push_back(a.tg / s);
    }
  }
  const double size_mib = static_cast<double>(model.weight_bytes()) / (1 << 20);
  const std::string name = std::filesystem::path(lm.dir).filename().string();
  const std::string fmt_name = model.layers().empty() ? "?" : model.layers()[0].qkv->format_name();
  const std::string head = model.lm_head().format_name();
  const std::string backend = be.name();
  fmt::print("| model | size | weights | lm_head | backend | threads | test | t/s | median t/s |\n");
  fmt::print("| --- | ---: | --- | --- | --- | ---: | ---: | ---: | ---: |\n");
  if (!pp_ts.empty()) {
    Stat s = stats(pp_ts);
    fmt::print("| {} | {:.2f} MiB | {} | {} | {} | {} | pp{} | {:.2f} ± {:.2f} | {:.2f} |\n", name, size_mib, fmt_name,
               head, backend, num_threads(), a.pp, s.mean, s.sd, s.median);
  }
  Stat tg{};
  if (!tg_ts.empty()) {
    tg = stats(tg_ts);
    fmt::print("| {} | {:.2f} MiB | {} | {} | {} | {} | tg{} | {:.2f} ± {:.2f} | {:.2f} |\n", name, size_mib, fmt_name,
               head, backend, num_threads(), a.tg, tg.mean, tg.sd, tg.median);
  }
  const double rss = peak_rss_mib();  // before the bandwidth probe's 1 GiB buffer
  if (!a.no_roofline && be.on_cpu()) {  // the CPU read bandwidth is no roofline for a GPU
    const double bw = measure_read_bandwidth_gbs(size_t{1} << 30, num_threads());
    const double bytes = static_cast<double>(model.weight_bytes_per_token());
    const double roof = bw * 1e9 / bytes;
    fmt::print("\nroofline: {:.1f} MB of weights read per token, measured read bandwidth {:.1f} GB/s ({} threads)"
               " -> decode roofline {:.1f} tok/s", bytes / 1e6, bw, num_threads(), roof);
    if (!tg_ts.empty()) fmt::print("; tg{} (median) reaches {:.1f}% of it", a.tg, 100.0 * tg.median / roof);
  }
  const Embedding& emb = model.embed();
  fmt::print("\nbytes read per token: body {:.1f} MB ({}), head {:.1f} MB ({}), embedding row {} B ({}; table "
             "{:.1f} MB{})",
             static_cast<double>(model.body_bytes_per_token()) / 1e6, fmt_name,
             static_cast<double>(model.lm_head().weight_bytes()) / 1e6, head, emb.row_bytes(),
             emb.dtype_name(), static_cast<double>(emb.bytes()) / 1e6,
             model.head_shares_embedding() ? ", shared with the head" : "");
  fmt::print("\npeak RSS (model + run): {:.1f} MiB\n", rss);
  return 0;
}

}  // namespace

TRITIUM_REGISTER_COMMAND([](CLI::App& app) {
  auto a = std::make_shared<BenchArgs>();
  CLI::App* sub = app.add_subcommand("bench", "Prompt-processing and generation throughput (llama-bench style)");
  add_model_options(sub, a->model);
  sub->add_option("-p,--n-prompt", a->pp, "prompt tokens (pp test; 0 = skip)")->check(CLI::Range(0, 1 << 20));
  sub->add_option("-n,--n-gen", a->tg, "generated tokens (tg test; 0 = skip)")->check(CLI::Range(0, 1 << 20));
  sub->add_option("-r,--repetitions", a->reps, "repetitions")->check(CLI::Range(1, 1000));
  sub->add_flag("--no-roofline", a->no_roofline, "skip the memory bandwidth measurement");
  CLI::App* serve = nullptr;
  auto run_serve = add_bench_serve(sub, &serve);
  runners()[sub] = [=] { return serve->parsed() ? run_serve() : run(*a); };
});

}  // namespace tritium::cli
