// tritium server: the OpenAI Responses API's view of a chat completion (a ResponseDialect,
// server/response_dialect.h), for POST /v1/responses.
//
// Spec: OpenAI's Responses API (the openai npm package's Response and ResponseStreamEvent types).
// Non-streaming: the chat.completion becomes {"id": "resp_...", "object": "response", "created_at", "status",
// "incomplete_details", "error", "model", "output", "usage": {"input_tokens", "input_tokens_details":
// {"cached_tokens"}, "output_tokens", "output_tokens_details": {"reasoning_tokens"}, "total_tokens"}} plus the
// request's echo fields (server/responses_request.h, responses_echo). "output" holds a message item
// {"type": "message", "id": "msg_...", "status", "role": "assistant", "content": [{"type": "output_text", "text",
// "annotations": []}]} when the choice has text or no call, then one {"type": "function_call", "id": "fc_...",
// "call_id", "name", "arguments", "status": "completed"} item per tool call.
// status: finish_reason "stop" / "tool_calls" -> "completed"; "length" -> "incomplete" with incomplete_details
// {"reason": "max_output_tokens"} (the message item "incomplete" too); "abort" / "error" -> "failed" with
// error {"code": "server_error", "message"}.
// Streaming: typed SSE records "event: NAME\ndata: {"type": NAME, "sequence_number": n, ...}\n\n", n counting
// from 0: response.created and response.in_progress (status "in_progress", no output yet); for the text
// response.output_item.added, response.content_part.added, response.output_text.delta (one per chunk with
// text), response.output_text.done, response.content_part.done, response.output_item.done; for each call (they
// arrive whole in the choice's last chunk) response.output_item.added, response.function_call_arguments.delta
// (the whole arguments), response.function_call_arguments.done, response.output_item.done; then
// response.completed, response.incomplete or response.failed carrying the whole response with its usage.
// Errors keep OpenAI's shape ({"error": {"message", "type", "param", "code"}}).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

#include "server/response_dialect.h"

namespace tritium::server {

class ResponsesDialect final : public ResponseDialect {
 public:
  /// `echo`: responses_echo of the request; `id`: "resp_..."; `model`: the served model's name.
  ResponsesDialect(nlohmann::json echo, std::string id, std::string model, int64_t created_at);

  std::string stream_chunk(const nlohmann::json& chunk) override;
  std::string stream_end(int64_t prompt_tokens, int64_t completion_tokens) override;
  nlohmann::json response(const nlohmann::json& chat_completion) override;
  nlohmann::json error(const ApiError& e) const override;

 private:
  /// The response object with `status`, the output given and usage (null: none yet).
  nlohmann::json response_object(const std::string& finish_reason, const nlohmann::json& output,
                                 const nlohmann::json& usage) const;
  std::string event(const std::string& type, nlohmann::json data);
  std::string open_message();
  std::string close_message(const std::string& finish_reason);

  nlohmann::json echo_;
  std::string id_, model_;
  int64_t created_at_;
  // Streaming state.
  int64_t sequence_ = 0;
  bool started_ = false, message_open_ = false;
  std::string text_;                                  ///< the message's text so far
  nlohmann::json output_ = nlohmann::json::array();  ///< finished output items
  std::string finish_reason_;
};

}  // namespace tritium::server
