#include "server/anthropic_dialect.h"

namespace tritium::server {

using nlohmann::json;

namespace {

std::string event(const char* name, const json& data) {
  return fmt::format("event: {}\ndata: {}\n\n", name, data.dump(-1, ' ', false, json::error_handler_t::replace));
}

// Chat's finish_reason (and vLLM's stop_reason: the matched stop string) as Anthropic's stop_reason.
json stop_reason_of(const json& finish, const json& stop_string) {
  if (finish == "tool_calls") return "tool_use";
  if (finish == "length") return "max_tokens";
  if (finish == "stop") return stop_string.is_string() ? "stop_sequence" : "end_turn";
  return nullptr;
}

json input_of(const json& call) {
  const json& a = call["function"]["arguments"];
  json in;
  std::string err;
  if (a.is_string() && parse_json_bounded(a.get<std::string>(), in, err) && in.is_object()) return in;
  return json::object();
}

}  // namespace

json anthropic_error_json(const ApiError& e) {
  std::string type = "invalid_request_error";
  switch (e.status) {
    case 401: type = "authentication_error"; break;
    case 403: type = "permission_error"; break;
    case 404: type = "not_found_error"; break;
    case 413: type = "request_too_large"; break;
    case 429: type = "rate_limit_error"; break;
    case 503: case 529: type = "overloaded_error"; break;
    default: if (e.status >= 500) type = "api_error";
  }
  return json{{"type", "error"}, {"error", {{"type", type}, {"message", e.message}}}};
}

std::string AnthropicDialect::tool_id(size_t i) const {
  return fmt::format("toolu_{}_{}", id_.substr(id_.find('_') + 1), i);
}

std::string AnthropicDialect::open_block(const std::string& type, const json& block) {
  std::string s = close_block();
  index_ = next_index_++;
  open_type_ = type;
  return s + event("content_block_start", {{"type", "content_block_start"}, {"index", index_}, {"content_block", block}});
}

std::string AnthropicDialect::close_block() {
  if (index_ < 0) return "";
  const int i = index_;
  index_ = -1;
  open_type_.clear();
  return event("content_block_stop", {{"type", "content_block_stop"}, {"index", i}});
}

std::string AnthropicDialect::stream_chunk(const json& chunk) {
  std::string s;
  if (!started_) {
    started_ = true;
    json msg = {{"id", id_}, {"type", "message"}, {"role", "assistant"}, {"model", model_},
                {"content", json::array()}, {"stop_reason", nullptr}, {"stop_sequence", nullptr},
                {"usage", {{"input_tokens", input_tokens_}, {"output_tokens", 0}}}};
    s += event("message_start", {{"type", "message_start"}, {"message", msg}});
    s += event("ping", {{"type", "ping"}});
  }
  if (!chunk.contains("choices") || chunk["choices"].empty()) return s;
  const json& c = chunk["choices"][0];
  const json& d = c.value("delta", json::object());
  if (d.contains("content") && d["content"].is_string() && !d["content"].get_ref<const std::string&>().empty()) {
    if (open_type_ != "text") s += open_block("text", {{"type", "text"}, {"text", ""}});
    s += event("content_block_delta", {{"type", "content_block_delta"}, {"index", index_},
                                       {"delta", {{"type", "text_delta"}, {"text", d["content"]}}}});
  }
  if (d.contains("tool_calls") && d["tool_calls"].is_array()) {
    for (const json& call : d["tool_calls"]) {
      s += open_block("tool_use", {{"type", "tool_use"}, {"id", tool_id(tools_++)},
                                   {"name", call["function"]["name"]}, {"input", json::object()}});
      s += event("content_block_delta", {{"type", "content_block_delta"}, {"index", index_},
                                         {"delta", {{"type", "input_json_delta"}, {"partial_json", input_of(call).dump()}}}});
      s += close_block();
    }
  }
  if (c.contains("finish_reason") && !c["finish_reason"].is_null()) {
    s += close_block();
    if (c["finish_reason"] == "error") {
      failed_ = true;
      s += event("error", anthropic_error_json(ApiError{500, "the engine failed while generating", "", "", ""}));
    }
    stop_reason_ = stop_reason_of(c["finish_reason"], c.value("stop_reason", json()));
    stop_sequence_ = stop_reason_ == "stop_sequence" ? c["stop_reason"] : json(nullptr);
  }
  return s;
}

std::string AnthropicDialect::stream_end(int64_t, int64_t completion_tokens) {
  if (failed_) return "";
  std::string s = close_block();
  s += event("message_delta", {{"type", "message_delta"},
                               {"delta", {{"stop_reason", stop_reason_}, {"stop_sequence", stop_sequence_}}},
                               {"usage", {{"output_tokens", completion_tokens}}}});
  s += event("message_stop", {{"type", "message_stop"}});
  return s;
}

json AnthropicDialect::response(const json& chat) {
  const json& c = chat["choices"][0];
  const json& m = c["message"];
  json content = json::array();
  if (m.contains("content") && m["content"].is_string() && !m["content"].get_ref<const std::string&>().empty())
    content.push_back({{"type", "text"}, {"text", m["content"]}});
  if (m.contains("tool_calls"))
    for (const json& call : m["tool_calls"])
      content.push_back({{"type", "tool_use"}, {"id", tool_id(tools_++)}, {"name", call["function"]["name"]},
                         {"input", input_of(call)}});
  const json reason = stop_reason_of(c["finish_reason"], c.value("stop_reason", json()));
  return json{{"id", id_},
              {"type", "message"},
              {"role", "assistant"},
              {"model", model_},
              {"content", content},
              {"stop_reason", reason},
              {"stop_sequence", reason == "stop_sequence" ? c["stop_reason"] : json(nullptr)},
              {"usage", {{"input_tokens", chat["usage"]["prompt_tokens"]},
                         {"output_tokens", chat["usage"]["completion_tokens"]}}}};
}

}  // namespace tritium::server
