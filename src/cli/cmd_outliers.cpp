// tritium outliers: activation outlier analysis of every linear layer's input (LLM.int8(), Dettmers et al.
// 2022, section 4.1): per-column max |x| histograms, outlier feature dimensions by the paper's rule
// (|x| >= alpha in >= 25% of the layers at >= 6% of the sequence positions), counts per layer and a
// suggested alpha from the natural break; a table on stdout and PNG plots through gnuplot with --plot DIR.
#include <fmt/format.h>
#include <spawn.h>
#include <sys/wait.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "cli/commands.h"
#include "cli/common.h"
#include "backend/cpu/cpu_backend.h"
#include "core/error.h"
#include "eval/outlier_stats.h"
#include "eval/text_file.h"
#include "kv/block_allocator.h"
#include "kv/kv_cache.h"

extern char** environ;

namespace fs = std::filesystem;

namespace tritium::cli {
namespace {

struct OutlierArgs {
  ModelOptions model;
  std::string file;
  int ctx = 512;
  int max_tokens = 4096;
  float alpha = 6.0f;
  std::string plot_dir;
};

std::string bin_label(const std::vector<float>& e, size_t i) {
  return i + 1 < e.size() ? fmt::format("[{:g}, {:g})", e[i], e[i + 1]) : fmt::format(">= {:g}", e[i]);
}

void run_gnuplot(const fs::path& script) {
  pid_t pid;
  std::string prog = "gnuplot", arg = script.string();
  char* argv[] = {prog.data(), arg.data(), nullptr};
  if (posix_spawnp(&pid, "gnuplot", nullptr, nullptr, argv, environ) != 0)
    fail("--plot: cannot run gnuplot (install the Debian package gnuplot-nox)");
  int st = 0;
  waitpid(pid, &st, 0);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) fail("--plot: gnuplot failed on {}", script.string());
}

void write_plots(const OutlierReport& r, const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) fail("--plot: cannot create {}: {}", dir.string(), ec.message());
  const auto& edges = OutlierCollector::histogram_edges();
  {  // histogram of per-column max |x|, summed over layers of each input width
    std::ofstream f(dir / "colmax_hist.dat");
    f << "# bin_lower_edge columns(all layers)\n";
    for (size_t i = 0; i < edges.size(); ++i) {
      int64_t n = 0;
      for (const auto& l : r.layers) n += i < l.histogram.size() ? l.histogram[i] : 0;
      f << edges[i] << " " << n << "\n";
    }
  }
  {  // sorted per-column max |x| (the natural break)
    std::vector<float> all;
    for (const auto& l : r.layers) all.insert(all.end(), l.col_max.begin(), l.col_max.end());
    std::sort(all.begin(), all.end(), std::greater<>());
    std::ofstream f(dir / "colmax_sorted.dat");
    for (size_t i = 0; i < all.size(); ++i) f << i + 1 << " " << all[i] << "\n";
  }
  {
    std::ofstream f(dir / "per_layer.dat");
    f << "# index name outlier_columns outlier_values\n";
    for (size_t i = 0; i < r.layers.size(); ++i)
      f << i << " " << r.layers[i].name << " " << r.layers[i].outlier_columns << " " << r.layers[i].outlier_values << "\n";
  }
  const fs::path script = dir / "plots.gp";
  {
    std::ofstream g(script);
    g << "set terminal pngcairo size 1000,600 noenhanced\n"
         "cd '" << dir.string() << "'\n"
         "set output 'colmax_hist.png'\n"
         "set title 'per-column max |x| of linear-layer inputs (all layers)'\n"
         "set logscale x 2\nset logscale y\nset xlabel 'max |x| (bin lower edge)'\nset ylabel 'columns'\n"
         "set style fill solid 0.6\n"
         "plot 'colmax_hist.dat' using ($1 > 0 ? $1 : 1.0/32):($2 > 0 ? $2 : 1/0) with boxes notitle\n"
         "unset logscale\n"
         "set output 'colmax_sorted.png'\n"
         "set title 'per-column max |x|, sorted (suggested alpha "
      << fmt::format("{:.3g}", r.suggested_alpha)
      << ")'\nset logscale xy\nset xlabel 'rank'\nset ylabel 'max |x|'\n"
         "plot 'colmax_sorted.dat' using 1:($2 > 0 ? $2 : 1/0) with lines title 'columns', "
      << r.suggested_alpha << " with lines dashtype 2 title 'alpha'\n"
         "unset logscale\n"
         "set output 'outliers_per_layer.png'\n"
         "set title 'columns with max |x| >= alpha = "
      << r.rule.alpha
      << " per layer'\nset xlabel 'linear layer (in forward order)'\nset ylabel 'columns'\n"
         "plot 'per_layer.dat' using 1:3 with boxes notitle\n";
  }
  run_gnuplot(script);
}

int run(const OutlierArgs& a) {
  LoadedModel lm = load_model(a.model);
  const Transformer& model = lm.model();
  auto* cpu = dynamic_cast<CpuBackend*>(lm.backend.get());
  if (!cpu) fail("outliers: observes the activations of the CPU forward; run it with --device cpu");
  const ModelConfig& c = model.config();
  const int ctx = std::min<int>(a.ctx, c.max_position_embeddings);
  std::vector<int32_t> tokens = lm.tokenizer->encode(read_text_universal_newlines(a.file), false);
  if (a.max_tokens > 0 && static_cast<int64_t>(tokens.size()) > a.max_tokens) tokens.resize(a.max_tokens);
  if (tokens.empty()) fail("{}: the text has no tokens", a.file);

  OutlierRule rule;
  rule.alpha = a.alpha;
  OutlierCollector col(rule);
  cpu->set_activation_observer([&](int layer, const char* proj, const float* x, int64_t M, int64_t K) {
    col.add(fmt::format("layers.{}.{}", layer, proj), x, M, K);
  });
  KvCacheSpec spec{c.num_layers, c.num_kv_heads, c.head_dim, 16, (ctx + 15) / 16};
  KvCache cache(spec);
  BlockAllocator alloc(spec.num_blocks);
  BlockTable bt;
  bt.reserve(alloc, ctx, spec.block_size);
  std::vector<float> logits;
  int64_t done = 0;
  for (size_t p = 0; p < tokens.size(); p += ctx) {
    const size_t n = std::min<size_t>(ctx, tokens.size() - p);
    col.begin_text();
    BatchChunk ch{std::span<const int32_t>(tokens.data() + p, n), 0, bt.blocks, false};
    cpu->forward(std::span<const BatchChunk>(&ch, 1), cache, logits);
    done += static_cast<int64_t>(n);
    fmt::print(stderr, "\routliers: {}/{} tokens", done, tokens.size());
  }
  fmt::print(stderr, "\n");
  cpu->set_activation_observer({});
  const OutlierReport r = col.report();

  fmt::print("{} tokens of {} in chunks of {}; alpha = {:g}; rule: |x| >= alpha in >= {:.0f}% of the layers of a width at "
             ">= {:.0f}% of the positions\n\n",
             r.positions, a.file, ctx, rule.alpha, 100 * rule.min_layer_fraction, 100 * rule.min_position_fraction);
  fmt::print("| layer | K | tokens | max abs x | columns with max >= alpha | values >= alpha | % of values |\n");
  fmt::print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n");
  for (const auto& l : r.layers) {
    const float mx = l.col_max.empty() ? 0.0f : *std::max_element(l.col_max.begin(), l.col_max.end());
    fmt::print("| {} | {} | {} | {:.3f} | {} | {} | {:.4f} |\n", l.name, l.k, l.tokens, mx, l.outlier_columns,
               l.outlier_values, 100.0 * static_cast<double>(l.outlier_values) / static_cast<double>(l.tokens * l.k));
  }
  const auto& edges = OutlierCollector::histogram_edges();
  fmt::print("\nhistogram of per-column max |x| (columns, all layers)\n| max abs x | columns |\n| --- | ---: |\n");
  for (size_t i = 0; i < edges.size(); ++i) {
    int64_t n = 0;
    for (const auto& l : r.layers) n += i < l.histogram.size() ? l.histogram[i] : 0;
    if (n > 0) fmt::print("| {} | {} |\n", bin_label(edges, i), n);
  }
  fmt::print("\noutlier feature dimensions (paper's rule): {}\n", r.features.size());
  if (!r.features.empty()) {
    fmt::print("| input width | column | share of layers | share of positions | max abs x |\n| ---: | ---: | ---: | ---: | ---: |\n");
    for (const auto& f : r.features)
      fmt::print("| {} | {} | {:.2f} | {:.3f} | {:.3f} |\n", f.k, f.column, f.layer_fraction, f.position_fraction,
                 f.max_abs);
  }
  if (r.alpha_from_break)
    fmt::print("\nsuggested alpha: {:.3f} (natural break in the sorted per-column max |x| between {:.3f} and {:.3f})\n",
               r.suggested_alpha, r.break_below, r.break_above);
  else
    fmt::print("\nsuggested alpha: {:.3f} (no natural break with a ratio >= 2; the rule's alpha)\n", r.suggested_alpha);
  if (!a.plot_dir.empty()) {
    write_plots(r, a.plot_dir);
    fmt::print("plots: {}/colmax_hist.png, colmax_sorted.png, outliers_per_layer.png\n", a.plot_dir);
  }
  return 0;
}

}  // namespace

TRITIUM_REGISTER_COMMAND([](CLI::App& app) {
  auto a = std::make_shared<OutlierArgs>();
  CLI::App* sub = app.add_subcommand("outliers", "Activation outlier features of linear-layer inputs (LLM.int8())");
  add_model_options(sub, a->model);
  sub->add_option("-f,--file", a->file, "text file")->required();
  sub->add_option("-c,--ctx", a->ctx, "tokens per chunk")->check(CLI::Range(1, 1 << 20));
  sub->add_option("--max-tokens", a->max_tokens, "tokens to analyse (0 = the whole text)")->check(CLI::Range(0, 1 << 30));
  sub->add_option("--alpha", a->alpha, "outlier magnitude threshold (default 6)")->check(CLI::PositiveNumber);
  sub->add_option("--plot", a->plot_dir, "write PNG plots (gnuplot) into this folder");
  runners()[sub] = [a] { return run(*a); };
});

}  // namespace tritium::cli
