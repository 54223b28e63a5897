#include "eval/evaluator.h"

#include <chrono>

#include "core/error.h"

namespace tritium {

void compute_task_metrics(TaskType type, const std::vector<TaskDoc>& docs, TaskResult& r) {
  r.per_example.clear();
  r.metrics.clear();
  r.n = static_cast<int64_t>(r.ll.size());
  TRITIUM_CHECK(r.ll.size() == docs.size(), "eval: {} results for {} documents", r.ll.size(), docs.size());
  if (type == TaskType::kGreedyTarget) {
    auto& acc = r.per_example["acc"];
    auto& ll = r.per_example["ll"];
    for (size_t i = 0; i < docs.size(); ++i) {
      acc.push_back(r.greedy[i].at(0) ? 1.0 : 0.0);
      ll.push_back(r.ll[i].at(0));
    }
    r.metrics["acc"] = {sample_mean(acc), stderr_of_mean(acc)};
    const PerplexityEstimate p = perplexity_from_loglikelihoods(ll);
    r.metrics["perplexity"] = {p.value, p.std_error};
    return;
  }
  auto& acc = r.per_example["acc"];
  auto& acc_norm = r.per_example["acc_norm"];
  for (size_t i = 0; i < docs.size(); ++i) {
    const auto& l = r.ll[i];
    const auto& d = docs[i];
    TRITIUM_CHECK(l.size() == d.choices.size(), "eval: document {} has {} scores for {} choices", i, l.size(),
                  d.choices.size());
    size_t pred = 0, pred_norm = 0;
    double best = l[0], best_norm = l[0] / static_cast<double>(utf8_length(d.choices[0]));
    for (size_t k = 1; k < l.size(); ++k) {
      if (l[k] > best) best = l[k], pred = k;
      const double nk = l[k] / static_cast<double>(utf8_length(d.choices[k]));
      if (nk > best_norm) best_norm = nk, pred_norm = k;
    }
    acc.push_back(static_cast<int>(pred) == d.gold ? 1.0 : 0.0);
    acc_norm.push_back(static_cast<int>(pred_norm) == d.gold ? 1.0 : 0.0);
  }
  r.metrics["acc"] = {sample_mean(acc), stderr_of_mean(acc)};
  r.metrics["acc_norm"] = {sample_mean(acc_norm), stderr_of_mean(acc_norm)};
}

TaskResult evaluate_task(Backend& backend, const Tokenizer& tok, const std::string& task,
                         const std::vector<TaskDoc>& docs, const EvalOptions& opts,
                         const std::function<void(size_t, size_t)>& progress) {
  const auto t0 = std::chrono::steady_clock::now();
  const TaskType type = eval_task_type(task);
  TaskResult r;
  r.task = task;
  std::vector<LoglikelihoodRequest> reqs;
  std::optional<int32_t> prefix = tok.bos_id() ? tok.bos_id() : tok.eos_id();
  for (const auto& d : docs)
    for (const auto& q : d.requests) {
      reqs.push_back(encode_pair(tok, q.context, q.continuation, opts.add_bos, prefix));
      r.tokens += static_cast<int64_t>(reqs.back().context.size() + reqs.back().continuation.size());
    }
  LoglikelihoodScorer scorer(backend, opts.scorer);
  const std::vector<LoglikelihoodResult> res = scorer.score(reqs, progress);
  size_t k = 0;
  for (const auto& d : docs) {
    std::vector<double> l;
    std::vector<uint8_t> g;
    for (size_t j = 0; j < d.requests.size(); ++j, ++k) {
      l.push_back(res[k].logprob);
      g.push_back(res[k].is_greedy ? 1 : 0);
    }
    r.ll.push_back(std::move(l));
    r.greedy.push_back(std::move(g));
    r.gold.push_back(d.gold);
  }
  compute_task_metrics(type, docs, r);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

nlohmann::json task_result_to_json(const TaskResult& r) {
  nlohmann::json j;
  j["n"] = r.n;
  for (const auto& [name, m] : r.metrics) j["metrics"][name] = {{"value", m.value}, {"stderr", m.std_error}};
  nlohmann::json ex;
  ex["ll"] = r.ll;
  ex["greedy"] = r.greedy;
  ex["gold"] = r.gold;
  for (const auto& [name, v] : r.per_example)
    if (name != "ll") ex[name] = v;
  j["examples"] = ex;
  j["seconds"] = r.seconds;
  j["tokens"] = r.tokens;
  return j;
}

TaskResult task_result_from_json(const std::string& task, const nlohmann::json& j, const std::string& where) {
  TaskResult r;
  r.task = task;
  try {
    r.n = j.at("n").get<int64_t>();
    for (const auto& [name, m] : j.at("metrics").items())
      r.metrics[name] = {m.at("value").get<double>(), m.at("stderr").get<double>()};
    const auto& ex = j.at("examples");
    r.ll = ex.at("ll").get<std::vector<std::vector<double>>>();
    r.greedy = ex.at("greedy").get<std::vector<std::vector<uint8_t>>>();
    r.gold = ex.at("gold").get<std::vector<int>>();
    for (const auto& [name, v] : ex.items())
      if (name != "ll" && name != "greedy" && name != "gold") r.per_example[name] = v.get<std::vector<double>>();
    if (eval_task_type(task) == TaskType::kGreedyTarget) {
      auto& ll = r.per_example["ll"];
      for (const auto& l : r.ll) ll.push_back(l.at(0));
    }
  } catch (const nlohmann::json::exception& e) {
    fail("{}: task '{}': malformed result ({})", where, task, e.what());
  }
  TRITIUM_CHECK(static_cast<int64_t>(r.ll.size()) == r.n, "{}: task '{}': n = {} but {} examples", where, task, r.n,
                r.ll.size());
  return r;
}

std::vector<ComparisonRow> compare_results(const nlohmann::json& a, const nlohmann::json& b) {
  std::vector<ComparisonRow> rows;
  TRITIUM_CHECK(a.contains("tasks") && b.contains("tasks"), "eval --compare: result files need a 'tasks' object");
  for (const auto& task : eval_task_names()) {
    if (!a["tasks"].contains(task) || !b["tasks"].contains(task)) continue;
    const TaskResult ra = task_result_from_json(task, a["tasks"][task], "A");
    const TaskResult rb = task_result_from_json(task, b["tasks"][task], "B");
    TRITIUM_CHECK(ra.n == rb.n, "eval --compare: task '{}' has {} examples in A and {} in B (use the same --limit)",
                  task, ra.n, rb.n);
    for (const char* m : {"acc", "acc_norm", "ll"}) {
      auto ia = ra.per_example.find(m);
      auto ib = rb.per_example.find(m);
      if (ia == ra.per_example.end() || ib == rb.per_example.end()) continue;
      rows.push_back({task, m, paired_test(ia->second, ib->second, std::string(m) != "ll")});
    }
  }
  return rows;
}

}  // namespace tritium
