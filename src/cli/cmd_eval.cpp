// tritium eval: zero-shot tasks with lm-evaluation-harness definitions, and paired comparison of two runs.
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/common.h"
#include "core/env.h"
#include "core/error.h"
#include "eval/evaluator.h"

namespace tritium::cli {
namespace {

struct EvalArgs {
  ModelOptions model;
  std::vector<std::string> tasks;
  std::string data_dir;
  int limit = 0;
  std::string json_out;
  bool add_bos = false;
  int batch_tokens = 1024;
  int max_length = 0;
  std::vector<std::string> compare;
};

/// A progress bar on stderr (redrawn in place on a terminal, a few plain lines otherwise).
class Progress {
 public:
  explicit Progress(std::string label) : label_(std::move(label)), tty_(::isatty(2) != 0),
                                         t0_(std::chrono::steady_clock::now()) {}
  void update(size_t done, size_t total) {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    const int width = 30;
    const int fill = total ? static_cast<int>(width * done / total) : width;
    const std::string bar = std::string(fill, '#') + std::string(width - fill, '.');
    const double rate = s > 0 ? done / s : 0;
    const double eta = rate > 0 ? (total - done) / rate : 0;
    const int pct = total ? static_cast<int>(100 * done / total) : 100;
    if (tty_) {
      fmt::print(stderr, "\r{:<15} [{}] {:>3}% {}/{} requests, {:.1f} req/s, ETA {:.0f} s ", label_, bar, pct, done,
                 total, rate, eta);
      if (done == total) fmt::print(stderr, "\n");
    } else if (pct >= next_pct_ || done == total) {
      fmt::print(stderr, "{:<15} {:>3}% {}/{} requests ({:.1f} s)\n", label_, pct, done, total, s);
      next_pct_ = pct + 25;
    }
  }

 private:
  std::string label_;
  bool tty_;
  int next_pct_ = 0;
  std::chrono::steady_clock::time_point t0_;
};

std::string default_data_dir() {
  if (std::string e = env::eval_data(); !e.empty()) return e;
  return "data/eval";
}

void print_table(const std::vector<TaskResult>& results) {
  fmt::print("| task | n | metric | value | ± stderr |\n|---|---:|---|---:|---:|\n");
  for (const auto& r : results)
    for (const auto& [name, m] : r.metrics)
      fmt::print("| {} | {} | {} | {:.4f} | {:.4f} |\n", r.task, r.n, name, m.value, m.std_error);
}

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail("{}: cannot open", path);
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    fail("{}: invalid JSON ({})", path, e.what());
  }
}

int run_compare(const EvalArgs& a) {
  const nlohmann::json ja = read_json(a.compare[0]), jb = read_json(a.compare[1]);
  const auto rows = compare_results(ja, jb);
  if (rows.empty()) fail("eval --compare: {} and {} share no task", a.compare[0], a.compare[1]);
  fmt::print("A = {}\nB = {}\n\n", a.compare[0], a.compare[1]);
  fmt::print("| task | metric | n | A | B | B - A | ± stderr | p (paired z) | A only / B only | p (McNemar) |\n"
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const auto& r : rows) {
    const auto& t = r.test;
    const bool ll = r.metric == "ll";
    fmt::print("| {} | {} | {} | {:.4f} | {:.4f} | {:+.4f} | {:.4f} | {:.4g} | {} | {} |\n", r.task,
               ll ? "loglikelihood" : r.metric, t.n, t.mean_a, t.mean_b, t.diff, t.diff_stderr, t.p_value,
               ll ? "" : fmt::format("{} / {}", t.a_only, t.b_only), ll ? "" : fmt::format("{:.4g}", t.mcnemar_p));
  }
  return 0;
}

int run(const EvalArgs& a) {
  if (!a.compare.empty()) return run_compare(a);
  if (a.tasks.empty()) fail("eval: give --task (one of lambada_openai, piqa, winogrande, arc_easy, arc_challenge, "
                            "copa, boolq, or all) or --compare A.json B.json");
  std::vector<std::string> tasks;
  for (const auto& t : a.tasks) {
    if (t == "all") {
      for (const auto& n : eval_task_names()) tasks.push_back(n);
    } else {
      eval_task_type(t);  // validates the name
      tasks.push_back(t);
    }
  }
  const std::string data = a.data_dir.empty() ? default_data_dir() : a.data_dir;
  LoadedModel lm = load_model(a.model);
  EvalOptions eo;
  eo.add_bos = a.add_bos;
  eo.scorer.batch_tokens = a.batch_tokens;
  eo.scorer.max_length = a.max_length;
  std::vector<TaskResult> results;
  nlohmann::json out;
  out["model"] = lm.dir;
  out["limit"] = a.limit;
  out["add_bos"] = a.add_bos;
  out["max_length"] = a.max_length > 0 ? a.max_length : lm.model().config().max_position_embeddings;
  for (const auto& t : tasks) {
    const std::string path = (std::filesystem::path(data) / (t + ".jsonl")).string();
    const std::vector<TaskDoc> docs = load_task_docs(t, path, a.limit);
    Progress bar(t);
    TaskResult r = evaluate_task(*lm.backend, *lm.tokenizer, t, docs, eo, [&](size_t d, size_t n) { bar.update(d, n); });
    fmt::print(stderr, "{}: {} docs, {} tokens, {:.1f} s ({:.0f} tok/s)\n", t, r.n, r.tokens, r.seconds,
               r.seconds > 0 ? r.tokens / r.seconds : 0.0);
    out["tasks"][t] = task_result_to_json(r);
    results.push_back(std::move(r));
  }
  print_table(results);
  if (!a.json_out.empty()) {
    std::ofstream f(a.json_out);
    if (!f) fail("{}: cannot open for writing", a.json_out);
    f << out.dump() << "\n";
    fmt::print(stderr, "wrote {}\n", a.json_out);
  }
  return 0;
}

}  // namespace

TRITIUM_REGISTER_COMMAND([](CLI::App& app) {
  auto a = std::make_shared<EvalArgs>();
  CLI::App* sub = app.add_subcommand("eval", "Zero-shot tasks (lm-evaluation-harness definitions) or --compare");
  add_model_options(sub, a->model);
  sub->add_option("--task", a->tasks, "task(s): lambada_openai, piqa, winogrande, arc_easy, arc_challenge, copa, "
                  "boolq, all (repeatable)");
  sub->add_option("--data", a->data_dir, "folder with <task>.jsonl in llm-foundry local format (default: "
                  "$TRITIUM_EVAL_DATA or data/eval)");
  sub->add_option("--limit", a->limit, "first N documents of each task (0 = all)")->check(CLI::Range(0, 1 << 30));
  sub->add_option("--json", a->json_out, "write metrics and per-example results to this JSON file");
  sub->add_flag("--add-bos", a->add_bos, "encode with special tokens (lm-eval add_bos_token=True; default off)");
  sub->add_option("--batch-tokens", a->batch_tokens, "tokens per forward call")->check(CLI::Range(1, 1 << 20));
  sub->add_option("--max-length", a->max_length, "context limit (default: the model's max_position_embeddings)")
      ->check(CLI::Range(0, 1 << 24));
  sub->add_option("--compare", a->compare, "compare two --json result files (paired tests)")->expected(2);
  runners()[sub] = [a] { return run(*a); };
});

}  // namespace tritium::cli
