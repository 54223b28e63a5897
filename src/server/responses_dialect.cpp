#include "server/responses_dialect.h"

#include <fmt/format.h>

namespace tritium::server {

using nlohmann::json;

namespace {

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string status_of(const std::string& finish_reason) {
  if (finish_reason == "length") return "incomplete";
  if (finish_reason == "abort" || finish_reason == "error") return "failed";
  return "completed";
}

json text_part(const std::string& text) {
  return {{"type", "output_text"}, {"text", text}, {"annotations", json::array()}};
}

json message_item(const std::string& id, const std::string& text, const std::string& status, bool with_content) {
  return {{"type", "message"},
          {"id", id},
          {"status", status},
          {"role", "assistant"},
          {"content", with_content ? json::array({text_part(text)}) : json::array()}};
}

json call_item(const std::string& id, const json& tool_call, const std::string& arguments, const std::string& status) {
  return {{"type", "function_call"},
          {"id", id},
          {"call_id", tool_call.value("id", "")},
          {"name", tool_call["function"].value("name", "")},
          {"arguments", arguments},
          {"status", status}};
}

json usage_json(int64_t input, int64_t output) {
  return {{"input_tokens", input},
          {"input_tokens_details", {{"cached_tokens", 0}}},
          {"output_tokens", output},
          {"output_tokens_details", {{"reasoning_tokens", 0}}},
          {"total_tokens", input + output}};
}

}  // namespace

ResponsesDialect::ResponsesDialect(json echo, std::string id, std::string model, int64_t created_at)
    : echo_(std::move(echo)), id_(std::move(id)), model_(std::move(model)), created_at_(created_at) {}

json ResponsesDialect::response_object(const std::string& finish_reason, const json& output, const json& usage) const {
  json r = echo_;
  const std::string status = finish_reason.empty() ? "in_progress" : status_of(finish_reason);
  r["id"] = id_;
  r["object"] = "response";
  r["created_at"] = created_at_;
  r["model"] = model_;
  r["status"] = status;
  r["output"] = output;
  r["incomplete_details"] = status == "incomplete" ? json{{"reason", "max_output_tokens"}} : json(nullptr);
  r["error"] = status == "failed" ? json{{"code", "server_error"},
                                         {"message", finish_reason == "abort" ? "the request was aborted"
                                                                              : "generation failed"}}
                                  : json(nullptr);
  r["usage"] = usage;
  return r;
}

std::string ResponsesDialect::event(const std::string& type, json data) {
  data["type"] = type;
  data["sequence_number"] = sequence_++;
  return "event: " + type + "\ndata: " + dump(data) + "\n\n";
}

std::string ResponsesDialect::open_message() {
  message_open_ = true;
  const std::string mid = "msg_" + id_.substr(id_.find('_') + 1);
  std::string out = event("response.output_item.added",
                          {{"output_index", output_.size()}, {"item", message_item(mid, "", "in_progress", false)}});
  out += event("response.content_part.added",
               {{"output_index", output_.size()}, {"item_id", mid}, {"content_index", 0}, {"part", text_part("")}});
  return out;
}

std::string ResponsesDialect::close_message(const std::string& finish_reason) {
  const std::string mid = "msg_" + id_.substr(id_.find('_') + 1);
  const size_t index = output_.size();
  const json item = message_item(mid, text_, finish_reason == "length" ? "incomplete" : "completed", true);
  // One append per event: the sequence numbers follow the order of the statements.
  std::string out = event("response.output_text.done", {{"output_index", index},
                                                        {"item_id", mid},
                                                        {"content_index", 0},
                                                        {"text", text_},
                                                        {"logprobs", json::array()}});
  out += event("response.content_part.done",
               {{"output_index", index}, {"item_id", mid}, {"content_index", 0}, {"part", text_part(text_)}});
  out += event("response.output_item.done", {{"output_index", index}, {"item", item}});
  output_.push_back(item);
  message_open_ = false;
  return out;
}

std::string ResponsesDialect::stream_chunk(const json& chunk) {
  std::string out;
  if (!started_) {
    started_ = true;
    const json r = response_object("", json::array(), nullptr);
    out += event("response.created", {{"response", r}});
    out += event("response.in_progress", {{"response", r}});
  }
  if (!chunk.contains("choices") || !chunk["choices"].is_array() || chunk["choices"].empty()) return out;
  const json& c = chunk["choices"][0];
  const json delta = c.value("delta", json::object());
  const std::string text = delta.contains("content") && delta["content"].is_string() ? delta["content"].get<std::string>() : "";
  if (!text.empty()) {
    if (!message_open_) out += open_message();
    text_ += text;
    const std::string mid = "msg_" + id_.substr(id_.find('_') + 1);
    out += event("response.output_text.delta", {{"output_index", output_.size()},
                                                 {"item_id", mid},
                                                 {"content_index", 0},
                                                 {"delta", text},
                                                 {"logprobs", json::array()}});
  }
  if (!c.contains("finish_reason") || !c["finish_reason"].is_string()) return out;
  finish_reason_ = c["finish_reason"].get<std::string>();
  const json calls = delta.contains("tool_calls") && delta["tool_calls"].is_array() ? delta["tool_calls"] : json::array();
  if (message_open_ || calls.empty()) {
    if (!message_open_) out += open_message();
    out += close_message(finish_reason_);
  }
  const std::string suffix = id_.substr(id_.find('_') + 1);
  for (size_t i = 0; i < calls.size(); ++i) {
    const std::string fid = fmt::format("fc_{}_{}", suffix, i);
    const std::string args = calls[i]["function"].value("arguments", "");
    const size_t index = output_.size();
    out += event("response.output_item.added", {{"output_index", index}, {"item", call_item(fid, calls[i], "", "in_progress")}});
    out += event("response.function_call_arguments.delta", {{"output_index", index}, {"item_id", fid}, {"delta", args}});
    out += event("response.function_call_arguments.done",
                 {{"output_index", index}, {"item_id", fid}, {"name", calls[i]["function"].value("name", "")},
                  {"arguments", args}});
    const json item = call_item(fid, calls[i], args, "completed");
    out += event("response.output_item.done", {{"output_index", index}, {"item", item}});
    output_.push_back(item);
  }
  return out;
}

std::string ResponsesDialect::stream_end(int64_t prompt_tokens, int64_t completion_tokens) {
  std::string out;
  if (!started_) out += stream_chunk(json::object());
  if (message_open_) out += close_message(finish_reason_);
  const std::string reason = finish_reason_.empty() ? "abort" : finish_reason_;
  const json r = response_object(reason, output_, usage_json(prompt_tokens, completion_tokens));
  const std::string status = r["status"].get<std::string>();
  const std::string type = status == "completed" ? "response.completed"
                           : status == "incomplete" ? "response.incomplete"
                                                    : "response.failed";
  out += event(type, {{"response", r}});
  return out;
}

json ResponsesDialect::response(const json& chat) {
  const json& c = chat.at("choices").at(0);
  const json& msg = c.at("message");
  const std::string finish = c.value("finish_reason", "stop");
  const std::string text = msg.contains("content") && msg["content"].is_string() ? msg["content"].get<std::string>() : "";
  const json calls = msg.contains("tool_calls") && msg["tool_calls"].is_array() ? msg["tool_calls"] : json::array();
  const std::string suffix = id_.substr(id_.find('_') + 1);
  json output = json::array();
  if (!text.empty() || calls.empty())
    output.push_back(message_item("msg_" + suffix, text, finish == "length" ? "incomplete" : "completed", true));
  for (size_t i = 0; i < calls.size(); ++i)
    output.push_back(call_item(fmt::format("fc_{}_{}", suffix, i), calls[i],
                               calls[i]["function"].value("arguments", ""), "completed"));
  const json& u = chat.at("usage");
  return response_object(finish, output,
                         usage_json(u.value("prompt_tokens", int64_t{0}), u.value("completion_tokens", int64_t{0})));
}

json ResponsesDialect::error(const ApiError& e) const { return error_json(e); }

}  // namespace tritium::server
