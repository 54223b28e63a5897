#include "server/structured_output.h"

#include <fmt/format.h>

#include "grammar/json_schema.h"
#include "server/openai_protocol.h"

namespace tritium::server {

using nlohmann::json;

std::shared_ptr<const grammar::Vocabulary> make_vocabulary(const Tokenizer& tok) {
  std::vector<std::string> bytes(static_cast<size_t>(tok.vocab_size()));
  for (int32_t i = 0; i < tok.vocab_size(); ++i)
    if (!tok.is_special(i)) bytes[static_cast<size_t>(i)] = tok.decode_bytes({i}, false);
  return std::make_shared<grammar::Vocabulary>(std::move(bytes));
}

namespace {

[[noreturn]] void refuse(const std::string& param, const std::string& msg) {
  throw ApiError{400, msg, "invalid_request_error", param, ""};
}

json schema_value(const json& v, const std::string& param) {
  if (v.is_object() || v.is_boolean()) return v;
  if (v.is_string()) {
    try {
      return json::parse(v.get<std::string>());
    } catch (const json::exception& e) {
      refuse(param, fmt::format("'{}' is not valid JSON: {}", param, e.what()));
    }
  }
  refuse(param, fmt::format("'{}' must be a JSON Schema (an object)", param));
}

}  // namespace

std::shared_ptr<grammar::TokenGrammar> parse_structured_output(const json& b,
                                                              std::shared_ptr<const grammar::Vocabulary> vocab) {
  for (const char* k : {"guided_grammar", "structural_tag"})
    if (b.contains(k) && !b[k].is_null()) refuse(k, fmt::format("'{}' is not supported (use guided_json, guided_regex, guided_choice or response_format)", k));
  std::string field;
  auto take = [&](const char* k) {
    if (!b.contains(k) || b[k].is_null()) return false;
    if (!field.empty()) refuse(k, fmt::format("'{}' and '{}' cannot be combined: give one output constraint", field, k));
    field = k;
    return true;
  };
  std::optional<grammar::Nfa> nfa;
  try {
    if (take("response_format")) {
      const json& rf = b["response_format"];
      if (!rf.is_object() || !rf.contains("type") || !rf["type"].is_string())
        refuse("response_format", "'response_format' must be an object with a string 'type'");
      const std::string& type = rf["type"].get_ref<const std::string&>();
      if (type == "json_object") {
        nfa = grammar::compile_json_object();
      } else if (type == "json_schema") {
        if (!rf.contains("json_schema") || !rf["json_schema"].is_object() || !rf["json_schema"].contains("schema"))
          refuse("response_format", "'response_format' of type 'json_schema' needs 'json_schema': {'name', 'schema'}");
        nfa = grammar::compile_json_schema(schema_value(rf["json_schema"]["schema"], "response_format"));
      } else if (type != "text") {
        refuse("response_format", fmt::format("'response_format' type '{}' is not one of text, json_object, json_schema", type));
      }
    }
    if (take("guided_json")) nfa = grammar::compile_json_schema(schema_value(b["guided_json"], "guided_json"));
    if (take("guided_regex")) {
      if (!b["guided_regex"].is_string()) refuse("guided_regex", "'guided_regex' must be a string");
      nfa = grammar::compile_regex(b["guided_regex"].get<std::string>());
    }
    if (take("guided_choice")) {
      const json& c = b["guided_choice"];
      if (!c.is_array() || c.empty()) refuse("guided_choice", "'guided_choice' must be a non-empty list of strings");
      std::vector<std::string> choices;
      for (const json& x : c) {
        if (!x.is_string()) refuse("guided_choice", "'guided_choice' must be a list of strings");
        choices.push_back(x.get<std::string>());
      }
      nfa = grammar::compile_choice(choices);
    }
  } catch (const grammar::GrammarError& e) {
    refuse(field, fmt::format("'{}': {}", field, e.what()));
  }
  if (!nfa) return nullptr;
  if (!vocab) refuse(field, "structured output is not available here (no vocabulary)");
  return std::make_shared<grammar::TokenGrammar>(std::move(*nfa), std::move(vocab));
}

}  // namespace tritium::server
