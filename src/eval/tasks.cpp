#include "eval/tasks.h"

#include <nlohmann/json.hpp>

#include <fstream>

#include "core/error.h"

namespace tritium {

const std::vector<std::string>& eval_task_names() {
  static const std::vector<std::string> names = {"lambada_openai", "piqa",          "winogrande", "arc_easy",
                                                 "arc_challenge",  "copa",          "boolq"};
  return names;
}

TaskType eval_task_type(const std::string& task) {
  if (task == "lambada_openai") return TaskType::kGreedyTarget;
  for (const auto& n : eval_task_names())
    if (n == task) return TaskType::kMultipleChoice;
  fail("eval: unknown task '{}' (known: lambada_openai, piqa, winogrande, arc_easy, arc_challenge, copa, boolq)",
       task);
}

size_t utf8_length(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

namespace {

// lm-eval's target delimiter " " in front of a continuation.
std::string delimited(const std::string& s) {
  std::string out = " ";
  out += s;
  return out;
}

const nlohmann::json& field(const nlohmann::json& row, const char* name, const std::string& where) {
  auto it = row.find(name);
  if (it == row.end()) fail("{}: missing field '{}'", where, name);
  return *it;
}

std::string str_field(const nlohmann::json& row, const char* name, const std::string& where) {
  const auto& v = field(row, name, where);
  if (!v.is_string()) fail("{}: field '{}' is not a string", where, name);
  return v.get<std::string>();
}

std::vector<std::string> str_list(const nlohmann::json& row, const char* name, const std::string& where) {
  const auto& v = field(row, name, where);
  if (!v.is_array() || v.empty()) fail("{}: field '{}' is not a non-empty list", where, name);
  std::vector<std::string> out;
  for (const auto& e : v) {
    if (!e.is_string()) fail("{}: field '{}' holds a non-string", where, name);
    out.push_back(e.get<std::string>());
  }
  return out;
}

int gold_field(const nlohmann::json& row, size_t n_choices, const std::string& where) {
  const auto& v = field(row, "gold", where);
  if (!v.is_number_integer()) fail("{}: field 'gold' is not an integer", where);
  const int64_t g = v.get<int64_t>();
  if (g < 0 || g >= static_cast<int64_t>(n_choices))
    fail("{}: gold {} is outside the {} choices", where, g, n_choices);
  return static_cast<int>(g);
}

}  // namespace

std::vector<TaskDoc> load_task_docs(const std::string& task, const std::string& jsonl_path, int limit) {
  const TaskType type = eval_task_type(task);
  std::ifstream in(jsonl_path, std::ios::binary);
  if (!in)
    fail("{}: cannot open the {} data file (point --data or $TRITIUM_EVAL_DATA at a folder of <task>.jsonl)",
         jsonl_path, task);
  std::vector<TaskDoc> docs;
  std::string line;
  int64_t lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    const std::string where = fmt::format("{}:{}", jsonl_path, lineno);
    nlohmann::json row;
    try {
      row = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      fail("{}: invalid JSON ({})", where, e.what());
    }
    if (!row.is_object()) fail("{}: a row must be a JSON object", where);
    TaskDoc d;
    if (type == TaskType::kGreedyTarget) {
      d.requests.push_back({str_field(row, "context", where), delimited(str_field(row, "continuation", where))});
    } else if (task == "winogrande") {
      d.choices = str_list(row, "context_options", where);
      const std::string cont = str_field(row, "continuation", where);
      for (const auto& opt : d.choices) d.requests.push_back({opt, delimited(cont)});
      d.gold = gold_field(row, d.choices.size(), where);
    } else {
      const std::string query = str_field(row, "query", where);
      d.choices = str_list(row, "choices", where);
      for (const auto& c : d.choices) d.requests.push_back({query, delimited(c)});
      d.gold = gold_field(row, d.choices.size(), where);
    }
    docs.push_back(std::move(d));
    if (limit > 0 && static_cast<int>(docs.size()) >= limit) break;
  }
  if (docs.empty()) fail("{}: no documents", jsonl_path);
  return docs;
}

}  // namespace tritium
