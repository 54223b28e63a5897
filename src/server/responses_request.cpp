#include "server/responses_request.h"

#include <fmt/format.h>

#include <set>

#include "server/openai_protocol.h"

namespace tritium::server {

using nlohmann::json;

namespace {

[[noreturn]] void bad(const std::string& param, const std::string& msg, const std::string& code = "") {
  throw ApiError{400, msg, "invalid_request_error", param, code};
}

bool given(const json& b, const char* key) { return b.contains(key) && !b[key].is_null(); }

const std::string& string_field(const json& obj, const char* key, const std::string& where, const std::string& param) {
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_string()) bad(param, fmt::format("{}.{} must be a string", where, key));
  return it->get_ref<const std::string&>();
}

// Message content: a string, or a list of text parts ("input_text" / "output_text" with a string "text").
std::string content_text(const json& c, const std::string& where) {
  if (c.is_string()) return c.get<std::string>();
  if (!c.is_array())
    bad("input", fmt::format("{}.content must be a string or a list of input_text / output_text parts", where));
  std::string s;
  for (size_t i = 0; i < c.size(); ++i) {
    const json& part = c[i];
    const std::string at = fmt::format("{}.content[{}]", where, i);
    if (!part.is_object() || !part.contains("type") || !part["type"].is_string())
      bad("input", fmt::format("{} must be an object with a string 'type'", at));
    const std::string& type = part["type"].get_ref<const std::string&>();
    if (type != "input_text" && type != "output_text")
      bad("input", fmt::format("{}.type '{}' is not supported (only input_text and output_text parts)", at, type));
    s += string_field(part, "text", at, "input");
  }
  return s;
}

// function_call_output.output: a string, or a list of input_text parts.
std::string output_text(const json& o, const std::string& where) {
  if (o.is_string()) return o.get<std::string>();
  if (!o.is_array()) bad("input", fmt::format("{}.output must be a string or a list of input_text parts", where));
  std::string s;
  for (size_t i = 0; i < o.size(); ++i) {
    const json& part = o[i];
    const std::string at = fmt::format("{}.output[{}]", where, i);
    if (!part.is_object() || part.value("type", json()) != "input_text")
      bad("input", fmt::format("{} must be an input_text part (other output types are not supported)", at));
    s += string_field(part, "text", at, "input");
  }
  return s;
}

const char kNoState[] =
    "this server keeps no responses or conversations (nothing is stored): send the whole conversation in 'input'";

json translate_input(const json& input) {
  json msgs = json::array();
  if (input.is_string()) {
    msgs.push_back({{"role", "user"}, {"content", input}});
    return msgs;
  }
  if (!input.is_array() || input.empty()) bad("input", "'input' must be a string or a non-empty list of items");
  std::set<std::string> call_ids;
  bool last_is_call_message = false;  // the last message is an assistant message that calls may join
  for (size_t i = 0; i < input.size(); ++i) {
    const json& it = input[i];
    const std::string where = fmt::format("input[{}]", i);
    if (!it.is_object()) bad("input", fmt::format("{} must be an object", where));
    const json type = it.value("type", json("message"));
    if (!type.is_string()) bad("input", fmt::format("{}.type must be a string", where));
    const std::string& t = type.get_ref<const std::string&>();
    if (t == "message") {
      const std::string& role = string_field(it, "role", where, "input");
      if (role != "user" && role != "assistant" && role != "system" && role != "developer")
        bad("input", fmt::format("{}.role '{}' is not one of user, assistant, system, developer", where, role));
      if (!it.contains("content")) bad("input", fmt::format("{}.content is required", where));
      msgs.push_back({{"role", role == "developer" ? "system" : role}, {"content", content_text(it["content"], where)}});
      last_is_call_message = role == "assistant";
    } else if (t == "function_call") {
      const std::string& call_id = string_field(it, "call_id", where, "input");
      const std::string& name = string_field(it, "name", where, "input");
      const std::string& args = string_field(it, "arguments", where, "input");
      if (call_id.empty()) bad("input", fmt::format("{}.call_id must not be empty", where));
      call_ids.insert(call_id);
      if (!last_is_call_message) {
        msgs.push_back({{"role", "assistant"}, {"content", ""}});
        last_is_call_message = true;
      }
      json& m = msgs.back();
      if (!m.contains("tool_calls")) m["tool_calls"] = json::array();
      m["tool_calls"].push_back(
          {{"id", call_id}, {"type", "function"}, {"function", {{"name", name}, {"arguments", args}}}});
    } else if (t == "function_call_output") {
      const std::string& call_id = string_field(it, "call_id", where, "input");
      if (!call_ids.count(call_id))
        bad("input", fmt::format("{}: no function_call item with call_id '{}' comes before this function_call_output "
                                 "(the server keeps no earlier responses: send the call in 'input' too)", where, call_id));
      if (!it.contains("output")) bad("input", fmt::format("{}.output is required", where));
      msgs.push_back({{"role", "tool"}, {"tool_call_id", call_id}, {"content", output_text(it["output"], where)}});
      last_is_call_message = false;
    } else if (t == "item_reference") {
      bad("input", fmt::format("{}: item references are not supported: {}", where, kNoState));
    } else {
      bad("input", fmt::format("{}.type '{}' is not supported (message, function_call, function_call_output)", where, t));
    }
  }
  return msgs;
}

json translate_tools(const json& tools) {
  if (!tools.is_array()) bad("tools", "'tools' must be a list of function tools");
  json out = json::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const json& t = tools[i];
    const std::string where = fmt::format("tools[{}]", i);
    if (!t.is_object()) bad("tools", fmt::format("{} must be an object", where));
    const json type = t.value("type", json());
    if (type != "function")
      bad("tools", fmt::format("{}.type {} is not supported (only \"function\" tools)", where, type.dump()));
    json fn = {{"name", string_field(t, "name", where, "tools")}};
    if (given(t, "description")) {
      if (!t["description"].is_string()) bad("tools", fmt::format("{}.description must be a string", where));
      fn["description"] = t["description"];
    }
    if (given(t, "parameters")) fn["parameters"] = t["parameters"];  // checked by check_tools
    if (given(t, "strict") && !t["strict"].is_boolean()) bad("tools", fmt::format("{}.strict must be a boolean", where));
    out.push_back({{"type", "function"}, {"function", std::move(fn)}});
  }
  return out;
}

json translate_tool_choice(const json& tc) {
  if (tc == "auto" || tc == "none" || tc == "required") return tc;
  if (tc.is_object() && tc.value("type", json()) == "function" && tc.contains("name") && tc["name"].is_string())
    return {{"type", "function"}, {"function", {{"name", tc["name"]}}}};
  bad("tool_choice", "'tool_choice' must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", \"name\"}");
}

json translate_format(const json& text) {
  if (!text.is_object()) bad("text", "'text' must be an object");
  for (const auto& [k, v] : text.items())
    if (k != "format" && k != "verbosity") bad("text", fmt::format("'text.{}' is not supported", k));
  if (given(text, "verbosity") && text["verbosity"] != "medium")
    bad("text.verbosity", "'text.verbosity' other than \"medium\" is not supported");
  if (!given(text, "format")) return nullptr;
  const json& f = text["format"];
  if (!f.is_object() || !f.contains("type") || !f["type"].is_string())
    bad("text.format", "'text.format' must be an object with a string 'type'");
  const std::string& type = f["type"].get_ref<const std::string&>();
  if (type == "text") return nullptr;
  if (type == "json_object") return {{"type", "json_object"}};
  if (type != "json_schema")
    bad("text.format", fmt::format("'text.format.type' '{}' is not one of text, json_object, json_schema", type));
  if (!f.contains("name") || !f["name"].is_string()) bad("text.format", "'text.format.name' must be a string");
  if (!f.contains("schema") || !f["schema"].is_object()) bad("text.format", "'text.format.schema' must be an object");
  json js = {{"name", f["name"]}, {"schema", f["schema"]}};
  if (given(f, "strict")) {
    if (!f["strict"].is_boolean()) bad("text.format", "'text.format.strict' must be a boolean");
    js["strict"] = f["strict"];
  }
  if (given(f, "description")) {
    if (!f["description"].is_string()) bad("text.format", "'text.format.description' must be a string");
    js["description"] = f["description"];
  }
  return {{"type", "json_schema"}, {"json_schema", std::move(js)}};
}

void check_string(const json& b, const char* key) {
  if (given(b, key) && !b[key].is_string()) bad(key, fmt::format("'{}' must be a string", key));
}

void check_bool(const json& b, const char* key) {
  if (given(b, key) && !b[key].is_boolean()) bad(key, fmt::format("'{}' must be a boolean", key));
}

void check_metadata(const json& b) {
  if (!given(b, "metadata")) return;
  const json& m = b["metadata"];
  if (!m.is_object() || m.size() > 16) bad("metadata", "'metadata' must be an object of at most 16 string values");
  for (const auto& [k, v] : m.items())
    if (!v.is_string() || k.size() > 64 || v.get_ref<const std::string&>().size() > 512)
      bad("metadata", "'metadata' keys are strings of at most 64 characters, values strings of at most 512");
}

// Fields with one accepted value (or null) besides their default: anything else changes what is asked for.
void check_neutral(const json& b) {
  if (given(b, "previous_response_id")) bad("previous_response_id", kNoState);
  if (given(b, "conversation")) bad("conversation", kNoState);
  if (given(b, "prompt")) bad("prompt", "stored prompts are not supported: send 'instructions' and 'input'");
  if (given(b, "background") && b["background"] != false)
    bad("background", "'background' responses are not supported (they need stored responses)");
  if (given(b, "truncation") && b["truncation"] != "disabled")
    bad("truncation", "'truncation' other than \"disabled\" is not supported");
  if (given(b, "service_tier") && b["service_tier"] != "auto" && b["service_tier"] != "default")
    bad("service_tier", "'service_tier' must be \"auto\" or \"default\"");
  if (given(b, "include") && !(b["include"].is_array() && b["include"].empty()))
    bad("include", "'include' is not supported (pass [] or leave it out)");
  if (given(b, "reasoning") && !(b["reasoning"].is_object() && b["reasoning"].empty()))
    bad("reasoning", "'reasoning' options are not supported");
  if (given(b, "top_logprobs") && b["top_logprobs"] != 0) bad("top_logprobs", "'top_logprobs' is not supported");
  if (given(b, "stream_options") && !b["stream_options"].is_object())
    bad("stream_options", "'stream_options' must be an object");
}

const std::set<std::string>& known_fields() {
  static const std::set<std::string> k = {
      // Responses
      "model", "input", "instructions", "tools", "tool_choice", "text", "max_output_tokens", "temperature", "top_p",
      "stream", "stream_options", "metadata", "user", "safety_identifier", "prompt_cache_key",
      "prompt_cache_retention", "parallel_tool_calls", "store", "service_tier", "truncation", "include", "reasoning",
      "background", "top_logprobs", "previous_response_id", "conversation", "prompt",
      // vLLM's sampling extras, passed on as they are
      "seed", "top_k", "min_p", "repetition_penalty", "presence_penalty", "frequency_penalty"};
  return k;
}

}  // namespace

json responses_to_chat(const json& b) {
  if (!b.is_object()) bad("", "the request body must be a JSON object");
  for (const auto& [k, v] : b.items())
    if (!known_fields().count(k)) bad(k, fmt::format("Unknown parameter: '{}'.", k), "unknown_parameter");
  check_neutral(b);
  for (const char* k : {"user", "safety_identifier", "prompt_cache_key", "prompt_cache_retention"}) check_string(b, k);
  for (const char* k : {"parallel_tool_calls", "store", "stream"}) check_bool(b, k);
  check_metadata(b);
  if (!given(b, "input")) bad("input", "'input' is required");
  json chat = json::object();
  json msgs = json::array();
  if (given(b, "instructions")) {
    if (!b["instructions"].is_string()) bad("instructions", "'instructions' must be a string");
    msgs.push_back({{"role", "system"}, {"content", b["instructions"]}});
  }
  for (auto& m : translate_input(b["input"])) msgs.push_back(std::move(m));
  chat["messages"] = std::move(msgs);
  if (given(b, "tools")) chat["tools"] = translate_tools(b["tools"]);
  if (given(b, "tool_choice")) chat["tool_choice"] = translate_tool_choice(b["tool_choice"]);
  if (given(b, "parallel_tool_calls")) chat["parallel_tool_calls"] = b["parallel_tool_calls"];
  if (given(b, "text"))
    if (json rf = translate_format(b["text"]); !rf.is_null()) chat["response_format"] = std::move(rf);
  if (given(b, "max_output_tokens")) {
    const json& m = b["max_output_tokens"];
    if (!m.is_number_integer() || (m.is_number_unsigned() ? m.get<uint64_t>() < 1 : m.get<int64_t>() < 1))
      bad("max_output_tokens", "'max_output_tokens' must be a positive integer");
    chat["max_tokens"] = m;
  }
  for (const char* k : {"model", "temperature", "top_p", "stream", "seed", "top_k", "min_p", "repetition_penalty",
                        "presence_penalty", "frequency_penalty"})
    if (given(b, k)) chat[k] = b[k];
  return chat;
}

json responses_echo(const json& b) {
  auto or_default = [&](const char* k, json def) { return given(b, k) ? b[k] : def; };
  json tools = json::array();
  if (given(b, "tools"))
    for (const json& t : b["tools"])
      tools.push_back({{"type", "function"},
                       {"name", t.value("name", json())},
                       {"description", t.value("description", json())},
                       {"parameters", t.value("parameters", json())},
                       {"strict", t.value("strict", json())}});
  json e = {{"instructions", or_default("instructions", nullptr)},
            {"max_output_tokens", or_default("max_output_tokens", nullptr)},
            {"metadata", or_default("metadata", json::object())},
            {"parallel_tool_calls", or_default("parallel_tool_calls", true)},
            {"temperature", or_default("temperature", 1.0)},
            {"top_p", or_default("top_p", 1.0)},
            {"tool_choice", or_default("tool_choice", "auto")},
            {"tools", std::move(tools)},
            {"text", json{{"format", {{"type", "text"}}}}},
            {"store", false},
            {"previous_response_id", nullptr},
            {"reasoning", nullptr},
            {"truncation", "disabled"},
            {"background", false},
            {"service_tier", "default"},
            {"top_logprobs", 0}};
  if (given(b, "text") && given(b["text"], "format")) e["text"]["format"] = b["text"]["format"];
  if (given(b, "text") && given(b["text"], "verbosity")) e["text"]["verbosity"] = b["text"]["verbosity"];
  if (given(b, "user")) e["user"] = b["user"];
  return e;
}

std::string responses_param(const std::string& p) {
  if (p == "messages") return "input";
  if (p == "max_tokens" || p == "max_completion_tokens") return "max_output_tokens";
  if (p == "response_format") return "text.format";
  return p;
}

}  // namespace tritium::server
