#include "server/anthropic_request.h"

#include <map>
#include <vector>
#include <string>

#include "server/openai_protocol.h"

namespace tritium::server {

using nlohmann::json;

namespace {

[[noreturn]] void bad(const std::string& param, const std::string& msg) {
  ApiError e;
  e.status = 400;
  e.param = param;
  e.message = param.empty() ? msg : fmt::format("{}: {}", param, msg);
  throw e;
}

const json* field(const json& o, const char* k) {
  auto it = o.find(k);
  return it == o.end() || it->is_null() ? nullptr : &*it;
}

std::string need_string(const json& o, const char* k, const std::string& where) {
  const json* v = field(o, k);
  if (!v || !v->is_string()) bad(where + "." + k, "must be a string");
  return v->get<std::string>();
}

// A list of {"type": "text", "text"} blocks (system, tool_result content) or a string, as one text.
std::string text_of(const json& v, const std::string& where, bool string_ok = true) {
  if (v.is_string() && string_ok) return v.get<std::string>();
  if (!v.is_array()) bad(where, "must be a string or a list of text blocks");
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string w = fmt::format("{}[{}]", where, i);
    if (!v[i].is_object() || !v[i].contains("type") || !v[i]["type"].is_string()) bad(w, "must be a block with a 'type'");
    const std::string t = v[i]["type"].get<std::string>();
    if (t == "image" || t == "document") bad(w + ".type", fmt::format("'{}' blocks are not supported by this model", t));
    if (t != "text") bad(w + ".type", fmt::format("'{}' blocks are not accepted here (only 'text')", t));
    if (i) s += "\n";
    s += need_string(v[i], "text", w);
  }
  return s;
}

json tools_of(const json& tools) {
  if (!tools.is_array()) bad("tools", "must be a list of tools");
  json out = json::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string w = fmt::format("tools[{}]", i);
    const json& t = tools[i];
    if (!t.is_object()) bad(w, "must be an object");
    if (const json* ty = field(t, "type"); ty && *ty != "custom")
      bad(w + ".type", fmt::format("server tools ({}) are not supported; give {{name, description, input_schema}}", ty->dump()));
    json fn = {{"name", need_string(t, "name", w)}};
    if (const json* d = field(t, "description")) {
      if (!d->is_string()) bad(w + ".description", "must be a string");
      fn["description"] = *d;
    }
    const json* s = field(t, "input_schema");
    if (!s || !s->is_object()) bad(w + ".input_schema", "must be a JSON Schema object");
    fn["parameters"] = *s;
    out.push_back({{"type", "function"}, {"function", fn}});
  }
  return out;
}

json tool_choice_of(const json& tc, bool has_tools) {
  if (!tc.is_object() || !tc.contains("type") || !tc["type"].is_string())
    bad("tool_choice", "must be {\"type\": \"auto\" | \"any\" | \"tool\" | \"none\"}");
  const std::string t = tc["type"].get<std::string>();
  if (const json* p = field(tc, "disable_parallel_tool_use"); p && !p->is_boolean())
    bad("tool_choice.disable_parallel_tool_use", "must be a boolean");
  if (t == "auto" || t == "none") return has_tools ? json(t) : json(nullptr);
  if (!has_tools) bad("tool_choice", fmt::format("type '{}' needs a non-empty 'tools' list", t));
  if (t == "any") return "required";
  if (t == "tool") return {{"type", "function"}, {"function", {{"name", need_string(tc, "name", "tool_choice")}}}};
  bad("tool_choice.type", fmt::format("'{}' is not one of auto, any, tool, none", t));
}

// One turn (its blocks) as chat messages appended to `out`; tool_use ids are collected into `ids` (id -> name).
void translate_turn(const std::string& role, const std::vector<std::pair<std::string, json>>& blocks, json& out,
                    std::map<std::string, std::string>& ids) {
  std::string text;
  bool has_text = false;
  json calls = json::array();
  auto flush_user = [&] {
    if (has_text) out.push_back({{"role", "user"}, {"content", text}});
    text.clear();
    has_text = false;
  };
  for (const auto& [w, b] : blocks) {
    const std::string t = b["type"].get<std::string>();
    if (t == "image" || t == "document") bad(w + ".type", fmt::format("'{}' blocks are not supported by this model", t));
    if (t == "text") {
      if (has_text) text += "\n";
      text += need_string(b, "text", w);
      has_text = true;
    } else if (role == "assistant" && (t == "thinking" || t == "redacted_thinking")) {
      continue;
    } else if (role == "assistant" && t == "tool_use") {
      const std::string id = need_string(b, "id", w), name = need_string(b, "name", w);
      const json* in = field(b, "input");
      if (!in || !in->is_object()) bad(w + ".input", "must be an object");
      if (ids.count(id)) bad(w + ".id", fmt::format("tool_use id '{}' is used twice", id));
      ids[id] = name;
      calls.push_back({{"id", id}, {"type", "function"}, {"function", {{"name", name}, {"arguments", in->dump()}}}});
    } else if (role == "user" && t == "tool_result") {
      const std::string id = need_string(b, "tool_use_id", w);
      auto it = ids.find(id);
      if (it == ids.end()) bad(w + ".tool_use_id", fmt::format("'{}' matches no tool_use of an earlier assistant turn", id));
      const json* c = field(b, "content");
      std::string content = c ? text_of(*c, w + ".content") : std::string();
      const json* err = field(b, "is_error");
      if (err && !err->is_boolean()) bad(w + ".is_error", "must be a boolean");
      if (err && err->get<bool>()) content = "Error: " + content;
      flush_user();
      out.push_back({{"role", "tool"}, {"tool_call_id", id}, {"name", it->second}, {"content", content}});
    } else {
      bad(w + ".type", fmt::format("'{}' is not a block type of a{} {} turn", t, role == "user" ? "" : "n", role));
    }
  }
  if (role == "user") {
    flush_user();
    return;
  }
  json m = {{"role", "assistant"}, {"content", text}};
  if (!calls.empty()) m["tool_calls"] = calls;
  out.push_back(std::move(m));
}

}  // namespace

json anthropic_to_chat(const json& b, bool count_tokens) {
  if (!b.is_object()) bad("", "the request body must be a JSON object");
  json chat = json::object();
  const json* model = field(b, "model");
  if (!model || !model->is_string()) bad("model", "is required (a string)");
  chat["model"] = *model;
  if (!count_tokens) {
    const json* mt = field(b, "max_tokens");
    if (!mt) bad("max_tokens", "is required");
    if (!mt->is_number_integer() || (mt->is_number_integer() && !mt->is_number_unsigned() && mt->get<int64_t>() < 1))
      bad("max_tokens", "must be an integer >= 1");
    chat["max_tokens"] = *mt;
    if (const json* s = field(b, "stop_sequences")) {
      if (!s->is_array()) bad("stop_sequences", "must be a list of strings");
      for (const auto& x : *s)
        if (!x.is_string()) bad("stop_sequences", "must be a list of strings");
      if (!s->empty()) chat["stop"] = *s;
    }
    if (const json* t = field(b, "temperature")) {
      if (!t->is_number() || t->get<double>() < 0 || t->get<double>() > 1) bad("temperature", "must be a number in [0, 1]");
      chat["temperature"] = *t;
    }
    for (const char* k : {"top_p", "top_k", "stream"})
      if (const json* v = field(b, k)) chat[k] = *v;  // parse_request checks their types and ranges
    if (const json* m = field(b, "metadata"); m && !m->is_object()) bad("metadata", "must be an object");
  }
  if (const json* th = field(b, "thinking")) {
    if (!th->is_object() || !th->contains("type") || !(*th)["type"].is_string())
      bad("thinking", "must be {\"type\": \"enabled\" | \"disabled\", ...}");
  }
  json msgs = json::array();
  if (const json* s = field(b, "system")) {
    const std::string sys = text_of(*s, "system");
    msgs.push_back({{"role", "system"}, {"content", sys}});
  }
  const json* m = field(b, "messages");
  if (!m || !m->is_array() || m->empty()) bad("messages", "must be a non-empty list of messages");
  // Turns: consecutive messages of one role merged (their blocks in order).
  std::vector<std::pair<std::string, std::vector<std::pair<std::string, json>>>> turns;
  for (size_t i = 0; i < m->size(); ++i) {
    const std::string w = fmt::format("messages[{}]", i);
    const json& msg = (*m)[i];
    if (!msg.is_object()) bad(w, "must be an object");
    const std::string role = need_string(msg, "role", w);
    if (role != "user" && role != "assistant") bad(w + ".role", fmt::format("'{}' is not one of user, assistant", role));
    if (turns.empty() && role != "user") bad(w + ".role", "the first message must use the 'user' role");
    const json* c = field(msg, "content");
    if (!c) bad(w + ".content", "is required");
    if (turns.empty() || turns.back().first != role) turns.push_back({role, {}});
    auto& blocks = turns.back().second;
    if (c->is_string()) {
      blocks.push_back({w + ".content", json{{"type", "text"}, {"text", *c}}});
    } else if (c->is_array()) {
      for (size_t j = 0; j < c->size(); ++j) {
        const std::string wb = fmt::format("{}.content[{}]", w, j);
        const json& blk = (*c)[j];
        if (!blk.is_object() || !blk.contains("type") || !blk["type"].is_string()) bad(wb, "must be a block with a 'type'");
        blocks.push_back({wb, blk});
      }
    } else {
      bad(w + ".content", "must be a string or a list of content blocks");
    }
  }
  if (turns.back().first == "assistant")
    bad("messages", "a final assistant message (prefill) is not supported; end with a user message");
  std::map<std::string, std::string> ids;
  for (const auto& [role, blocks] : turns) translate_turn(role, blocks, msgs, ids);
  chat["messages"] = std::move(msgs);
  const json* tools = field(b, "tools");
  const bool has_tools = tools && tools->is_array() && !tools->empty();
  if (tools) {
    json t = tools_of(*tools);
    if (!t.empty()) chat["tools"] = std::move(t);
  }
  if (const json* tc = field(b, "tool_choice")) {
    json c = tool_choice_of(*tc, has_tools);
    if (!c.is_null()) chat["tool_choice"] = std::move(c);
    if (const json* p = field(*tc, "disable_parallel_tool_use"); p && p->get<bool>()) chat["parallel_tool_calls"] = false;
  }
  return chat;
}

}  // namespace tritium::server
