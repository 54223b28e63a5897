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
  switch (s) {
    case ToolCallSyntax::kHermes: return "<tool_call>";
    case ToolCallSyntax::kLlama3: return "{";
    case ToolCallSyntax::kJsonList: return "[";
    case ToolCallSyntax::kNone: break;
  }
  return "";
}

namespace {

[[noreturn]] void bad_tools(const std::string& where, const std::string& what) {
  throw ApiError{400, fmt::format("{}: {}", where, what), "invalid_request_error", "tools", ""};
}

bool is_json_type(const json& t) {
  static const char* const kTypes[] = {"object", "array", "string", "number", "integer", "boolean", "null"};
  if (!t.is_string()) return false;
  for (const char* k : kTypes)
    if (t == k) return true;
  return false;
}

// The structure of one JSON Schema (see check_tools). The recursion follows the document, whose nesting the body
// parser bounds (kMaxJsonDepth), so it is at most that deep.
void check_schema(const json& s, const std::string& where) {
  if (s.is_boolean()) return;
  if (!s.is_object()) bad_tools(where, "a schema must be an object or a boolean");
  if (auto t = s.find("type"); t != s.end()) {
    if (t->is_array()) {
      for (const json& x : *t)
        if (!is_json_type(x)) bad_tools(where + ".type", fmt::format("{} is not a JSON Schema type name", x.dump()));
    } else if (!is_json_type(*t)) {
      bad_tools(where + ".type", fmt::format("{} is not a JSON Schema type name (object, array, string, number, "
                                             "integer, boolean, null)", t->dump()));
    }
  }
  for (const char* k : {"properties", "$defs", "definitions", "patternProperties"})
    if (auto p = s.find(k); p != s.end()) {
      if (!p->is_object()) bad_tools(where + "." + k, "must be an object of schemas");
      for (const auto& [name, sub] : p->items()) check_schema(sub, where + "." + k + "." + name);
    }
  for (const char* k : {"items", "additionalProperties", "not", "contains", "propertyNames"})
    if (auto p = s.find(k); p != s.end()) check_schema(*p, where + "." + k);
  for (const char* k : {"anyOf", "allOf", "oneOf", "prefixItems"})
    if (auto p = s.find(k); p != s.end()) {
      if (!p->is_array()) bad_tools(where + "." + k, "must be a list of schemas");
      for (size_t i = 0; i < p->size(); ++i) check_schema((*p)[i], fmt::format("{}.{}[{}]", where, k, i));
    }
  if (auto r = s.find("required"); r != s.end()) {
    if (!r->is_array()) bad_tools(where + ".required", "must be a list of property names");
    for (const json& x : *r)
      if (!x.is_string()) bad_tools(where + ".required", "must be a list of property names");
  }
}

}  // namespace

void check_tools(const json& body) {
  auto it = body.find("tools");
  if (it == body.end() || it->is_null()) return;
  if (!it->is_array()) bad_tools("tools", "must be an array of {\"type\": \"function\", \"function\": {...}} objects");
  for (size_t i = 0; i < it->size(); ++i) {
    const json& t = (*it)[i];
    const std::string at = fmt::format("tools[{}]", i);
    if (!t.is_object()) bad_tools(at, "a tool must be an object {\"type\": \"function\", \"function\": {...}}");
    if (t.contains("type") && t["type"] != "function") bad_tools(at + ".type", "must be \"function\"");
    auto f = t.find("function");
    if (f == t.end() || !f->is_object()) bad_tools(at + ".function", "must be an object with a 'name'");
    auto name = f->find("name");
    if (name == f->end() || !name->is_string() || name->get_ref<const std::string&>().empty())
      bad_tools(at + ".function.name", "must be a non-empty string");
    if (auto d = f->find("description"); d != f->end() && !d->is_null() && !d->is_string())
      bad_tools(at + ".function.description", "must be a string");
    if (auto p = f->find("parameters"); p != f->end() && !p->is_null()) {
      if (!p->is_object()) bad_tools(at + ".function.parameters", "must be a JSON Schema object");
      check_schema(*p, at + ".function.parameters");
    }
  }
}

grammar::Nfa tool_call_grammar(const json& tools, const std::string& only, ToolCallSyntax syntax, bool parallel) {
  auto bad = [](const std::string& param, const std::string& m) -> ApiError {
    return ApiError{400, m, "invalid_request_error", param, ""};
  };
  if (syntax == ToolCallSyntax::kNone) throw bad("tool_choice", "no tool-call syntax to constrain the output to");
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
    if (syntax == ToolCallSyntax::kJsonList) return grammar::compile_tool_call_list(fns, "parameters", parallel ? -1 : 1);
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
  } else if (syntax == ToolCallSyntax::kJsonList) {
    // All or nothing: a list whose every element is a call.
    json j;
    std::string error;
    if (parse_json_bounded(trim(text), j, error) && j.is_array() && !j.empty()) {
      for (const json& e : j) {
        ToolCall c;
        if (!to_call(e, "parameters", c)) {
          calls.clear();
          return calls;
        }
        calls.push_back(std::move(c));
      }
      content.clear();
    }
  }
  return calls;
}

}  // namespace tritium::server
