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
  if (v.is_string()) return parse_client_json(v.get_ref<const std::string&>(), param);  // nesting bounded as a body
  refuse(param, fmt::format("'{}' must be a JSON Schema (an object)", param));
}

}  // namespace

std::shared_ptr<grammar::TokenGrammar> GrammarCache::get(const std::string& key, const std::function<grammar::Nfa()>& make) {
  {
    std::lock_guard lk(mu_);
    for (auto it = lru_.begin(); it != lru_.end(); ++it)
      if (it->first == key) {
        lru_.splice(lru_.begin(), lru_, it);
        return lru_.front().second;
      }
  }
  auto g = std::make_shared<grammar::TokenGrammar>(make(), vocab_);
  std::lock_guard lk(mu_);
  lru_.emplace_front(key, g);
  if (lru_.size() > capacity_) lru_.pop_back();
  return g;
}

std::shared_ptr<grammar::TokenGrammar> parse_structured_output(const json& b, GrammarCache* cache) {
  for (const char* k : {"guided_grammar", "structural_tag"})
    if (b.contains(k) && !b[k].is_null()) refuse(k, fmt::format("'{}' is not supported (use guided_json, guided_regex, guided_choice or response_format)", k));
  std::string field;
  auto take = [&](const char* k) {
    if (!b.contains(k) || b[k].is_null()) return false;
    if (!field.empty()) refuse(k, fmt::format("'{}' and '{}' cannot be combined: give one output constraint", field, k));
    field = k;
    return true;
  };
  // What to compile, as a function of the request's fields (the cache key is its specification).
  std::function<grammar::Nfa()> make;
  std::string key;
  if (take("response_format")) {
    const json& rf = b["response_format"];
    if (!rf.is_object() || !rf.contains("type") || !rf["type"].is_string())
      refuse("response_format", "'response_format' must be an object with a string 'type'");
    const std::string& type = rf["type"].get_ref<const std::string&>();
    if (type == "json_object") {
      key = "json_object";
      make = [] { return grammar::compile_json_object(); };
    } else if (type == "json_schema") {
      if (!rf.contains("json_schema") || !rf["json_schema"].is_object() || !rf["json_schema"].contains("schema"))
        refuse("response_format", "'response_format' of type 'json_schema' needs 'json_schema': {'name', 'schema'}");
      const json schema = schema_value(rf["json_schema"]["schema"], "response_format");
      key = "schema:" + schema.dump();
      make = [schema] { return grammar::compile_json_schema(schema); };
    } else if (type != "text") {
      refuse("response_format", fmt::format("'response_format' type '{}' is not one of text, json_object, json_schema", type));
    }
  }
  if (take("guided_json")) {
    const json schema = schema_value(b["guided_json"], "guided_json");
    key = "schema:" + schema.dump();
    make = [schema] { return grammar::compile_json_schema(schema); };
  }
  if (take("guided_regex")) {
    if (!b["guided_regex"].is_string()) refuse("guided_regex", "'guided_regex' must be a string");
    const std::string re = b["guided_regex"].get<std::string>();
    key = "regex:" + re;
    make = [re] { return grammar::compile_regex(re); };
  }
  if (take("guided_choice")) {
    const json& c = b["guided_choice"];
    if (!c.is_array() || c.empty()) refuse("guided_choice", "'guided_choice' must be a non-empty list of strings");
    std::vector<std::string> choices;
    for (const json& x : c) {
      if (!x.is_string()) refuse("guided_choice", "'guided_choice' must be a list of strings");
      choices.push_back(x.get<std::string>());
    }
    key = "choice:" + c.dump();
    make = [choices] { return grammar::compile_choice(choices); };
  }
  if (!make) return nullptr;
  if (!cache) refuse(field, "structured output is not available here (no vocabulary)");
  try {
    return cache->get(key, make);
  } catch (const grammar::GrammarError& e) {
    refuse(field, fmt::format("'{}': {}", field, e.what()));
  }
}

}  // namespace tritium::server
