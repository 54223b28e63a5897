// tritium eval: running a zero-shot task end to end (requests -> loglikelihoods -> metrics), result JSON, and
// the paired comparison of two result files.
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "eval/loglikelihood.h"
#include "eval/metrics.h"
#include "eval/tasks.h"

namespace tritium {

struct EvalOptions {
  bool add_bos = false;  ///< lm-eval HFLM add_bos_token (default false: no special tokens when encoding)
  ScorerOptions scorer;
};

struct MetricValue {
  double value = 0, std_error = 0;
};

/// Per-example outcomes and aggregate metrics of one task.
struct TaskResult {
  std::string task;
  int64_t n = 0;
  std::vector<std::vector<double>> ll;      ///< [doc][request] summed loglikelihoods
  std::vector<std::vector<uint8_t>> greedy; ///< [doc][request] is_greedy
  std::vector<int> gold;                    ///< gold index per doc (0 for lambada)
  /// Per-example values of each metric: "acc", "acc_norm" (multiple choice: 0/1), "acc" (lambada: greedy 0/1),
  /// "ll" (lambada: the continuation loglikelihood).
  std::map<std::string, std::vector<double>> per_example;
  /// Aggregates: acc, acc_norm (multiple choice); acc, perplexity (lambada); each with its standard error.
  std::map<std::string, MetricValue> metrics;
  double seconds = 0;
  int64_t tokens = 0;  ///< context + continuation tokens over all requests (before sharing)
};

/// Metrics from per-request loglikelihoods (lm-eval process_results + aggregation):
/// multiple choice: acc = [argmax ll == gold], acc_norm = [argmax ll / len(choice) in characters == gold]
/// (ties go to the lowest index, as np.argmax); greedy target: acc = is_greedy, perplexity = exp(-mean ll).
/// Standard errors: stderr_of_mean for accuracies, the delta method for perplexity.
void compute_task_metrics(TaskType type, const std::vector<TaskDoc>& docs, TaskResult& r);

/// Encodes every request (encode_pair), scores them in batches and fills a TaskResult. progress(done, total)
/// counts requests.
TaskResult evaluate_task(Backend& backend, const Tokenizer& tok, const std::string& task,
                         const std::vector<TaskDoc>& docs, const EvalOptions& opts,
                         const std::function<void(size_t, size_t)>& progress = {});

/// {"n", "metrics": {name: {"value", "stderr"}}, "examples": {"ll", "greedy", "gold", name: [...]}, "seconds"}
nlohmann::json task_result_to_json(const TaskResult& r);
/// Inverse of task_result_to_json (per-example values and metrics). Throws tritium::Error naming `where`.
TaskResult task_result_from_json(const std::string& task, const nlohmann::json& j, const std::string& where);

/// One row of a comparison: a metric of a task in run A and run B.
struct ComparisonRow {
  std::string task, metric;
  PairedTest test;
};
/// Compares two result files ({"tasks": {task: task_result_to_json}}): for every task in both with the same
/// number of examples, acc and acc_norm (paired z-test + exact McNemar) and, for lambada, the per-example
/// loglikelihood (paired z-test). Throws tritium::Error when a shared task has different example counts.
std::vector<ComparisonRow> compare_results(const nlohmann::json& a, const nlohmann::json& b);

}  // namespace tritium
