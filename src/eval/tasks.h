// tritium eval: zero-shot task definitions (lm-evaluation-harness request construction over the llm-foundry
// local jsonl formats).
#pragma once

#include <string>
#include <vector>

namespace tritium {

/// How a task's documents are scored.
enum class TaskType {
  kMultipleChoice,  ///< acc / acc_norm over the choices' summed loglikelihoods
  kGreedyTarget,    ///< one continuation: acc = every token is the greedy argmax; perplexity = exp(-mean ll)
};

/// One loglikelihood request: log P(continuation | context), as lm-eval's Instance arguments.
struct TextRequest {
  std::string context, continuation;
};

/// One evaluation document turned into requests (lm-eval's construct_requests).
struct TaskDoc {
  std::vector<TextRequest> requests;
  /// The choice strings whose length in characters (Unicode code points, Python len) normalizes acc_norm:
  /// the answer choices, or for winogrande the option contexts (lm-eval's doc_to_choice). Empty for
  /// kGreedyTarget tasks.
  std::vector<std::string> choices;
  int gold = 0;
};

/// The supported tasks: lambada_openai, piqa, winogrande, arc_easy, arc_challenge, copa, boolq.
const std::vector<std::string>& eval_task_names();
/// Throws tritium::Error naming the task when it is not one of eval_task_names().
TaskType eval_task_type(const std::string& task);

/// Reads the first `limit` documents (0 = all) of `task` from an llm-foundry local jsonl file and builds the
/// requests with lm-eval's target delimiter " ":
///   lambada_openai {context, continuation}: (context, " " + continuation);
///   piqa, arc_easy, arc_challenge, copa, boolq {query, choices, gold}: (query, " " + choice) per choice;
///   winogrande {context_options, continuation, gold} (partial scoring): (option, " " + continuation) per option.
/// Throws tritium::Error naming the file and line on malformed rows (missing field, gold out of range).
std::vector<TaskDoc> load_task_docs(const std::string& task, const std::string& jsonl_path, int limit = 0);

/// Length of a UTF-8 string in Unicode code points (Python's len of the str).
size_t utf8_length(const std::string& s);

}  // namespace tritium
