#include "server/tool_calls.h"

#include <fmt/format.h>

#include "grammar/json_schema.h"
#include "server/openai_protocol.h"

namespace tritium::server {

using nlohmann::json;

ToolCallSyntax detect_tool_call_syntax(const std::string& src) {
  if (src.find("<tool_call>") != std::string::npos) return ToolCallSyntax::kHermes;
  if (src.find("parameters") != std::string::npos &&
      (src.find("<|python_tag|>") != std::string::npos || src.find("ipython") != std::string::npos))
    return ToolCallSyntax::kLlama3;
  return ToolCallSyntax::kNone;
}

std::string tool_call_marker(ToolCallSyntax s) {
  return s == ToolCallSyntax::kHermes ? "<tool_call>" : s == ToolCallSyntax::kLlama3 ? "{" : "";
}

grammar::Nfa tool_call_grammar(const json& tools, const std::string& only, ToolCallSyntax syntax) {
  auto bad = [](const std::string& param, const std::string& m) -> ApiError {
    return ApiError{400, m, "invalid_request_error", param, ""};
  };
  if (syntax == ToolCallSyntax::kNone)
    throw bad("tool_choice", "this model's chat template has no known tool-call syntax: tool_choice \"required\" or a "
                             "named function cannot be enforced");
  if (!tools.is_array() || tools.empty()) throw bad("tools", "tool_choice needs a non-empty 'tools' array");
  std::vector<std::pair<std::string, json>> fns;
  for (const json& t : tools) {
    if (!t.is_object() || t.value("type", "") != "function" || !t.contains("function") || !t["function"].is_object() ||
        !t["function"].contains("name") || !t["function"]["name"].is_string())
      throw bad("tools", "each tool must be {\"type\": \"function\", \"function\": {\"name\", \"parameters\"}}");
    const std::string name = t["function"]["name"].get<std::string>();
    if (!only.empty() && name != only) continue;
    fns.emplace_back(name, t["function"].value("parameters", json(nullptr)));
  }
  if (fns.empty()) throw bad("tool_choice", fmt::format("tool_choice names '{}', which is not in 'tools'", only));
  try {
    if (syntax == ToolCallSyntax::kHermes) return grammar::compile_tool_call(fns, "<tool_call>\n", "arguments", "\n</tool_call>");
    return grammar::compile_tool_call(fns, "", "parameters", "");
  } catch (const grammar::GrammarError& e) {
    throw bad("tools", fmt::format("a function's parameters: {}", e.what()));
  }
}

namespace {
std::string trim(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t\r\n");
  if (a == std::string::npos) return "";
  const size_t b = s.find_last_not_of(" \t\r\n");
  return s.substr(a, b - a + 1);
}

bool to_call(const json& j, const char* args_key, ToolCall& out) {
  if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) return false;
  out.name = j["name"].get<std::string>();
  const json args = j.contains(args_key) ? j[args_key] : j.value("arguments", json::object());
  out.arguments = args.dump();
  return true;
}
}  // namespace

// Calls in the output are parsed with the request bodies' nesting bound (parse_json_bounded): output nested
// deeper than that is not a call, and no later copy or dump of it recurses past the bound.
std::vector<ToolCall> parse_tool_calls(const std::string& text, ToolCallSyntax syntax, std::string& content) {
  std::vector<ToolCall> calls;
  content = text;
  if (syntax == ToolCallSyntax::kHermes) {
    std::string rest;
    size_t pos = 0;
    while (true) {
      const size_t a = text.find("<tool_call>", pos);
      if (a == std::string::npos) break;
      const size_t b = text.find("</tool_call>", a);
      if (b == std::string::npos) break;
      json j;
      std::string error;
      ToolCall c;
      if (!parse_json_bounded(std::string_view(text).substr(a + 11, b - a - 11), j, error) || !to_call(j, "arguments", c))
        break;
      rest += text.substr(pos, a - pos);
      calls.push_back(std::move(c));
      pos = b + 12;
    }
    if (!calls.empty()) content = trim(rest + text.substr(pos));
  } else if (syntax == ToolCallSyntax::kLlama3) {
    std::string t = trim(text);
    if (t.rfind("<|python_tag|>", 0) == 0) t = trim(t.substr(14));
    json j;
    std::string error;
    ToolCall c;
    if (parse_json_bounded(t, j, error) && to_call(j, "parameters", c)) {
      calls.push_back(std::move(c));
      content.clear();
    }
  }
  return calls;
}

}  // namespace tritium::server
