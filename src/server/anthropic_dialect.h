// tritium server: a chat completion answered as Anthropic's Messages API (server/response_dialect.h).
//
// Non-streaming: {"id": "msg_...", "type": "message", "role": "assistant", "model", "content": [{"type": "text",
// "text"} and/or {"type": "tool_use", "id": "toolu_...", "name", "input": {...}}], "stop_reason": "end_turn" |
// "max_tokens" | "stop_sequence" | "tool_use" (null for an aborted call), "stop_sequence": the stop string that
// matched (the engine reports it: RequestOutput::stop_string) or null, "usage": {"input_tokens", "output_tokens"}}.
// Streaming: SSE records "event: NAME\ndata: {...}\n\n": message_start (the message with empty content and
// usage.input_tokens), ping, then per block content_block_start / content_block_delta (text_delta, or one
// input_json_delta with the whole arguments: a call is only known once the output has finished) /
// content_block_stop, then message_delta ({"delta": {"stop_reason", "stop_sequence"}, "usage": {"output_tokens"}})
// and message_stop. An engine failure mid-stream is an "error" event (api_error).
// Errors: {"type": "error", "error": {"type", "message"}} with the type by status: 400 invalid_request_error,
// 401 authentication_error, 403 permission_error, 404 not_found_error, 413 request_too_large, 429
// rate_limit_error, 503 / 529 overloaded_error, other 5xx api_error.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

#include "server/response_dialect.h"

namespace tritium::server {

/// {"type": "error", "error": {"type", "message"}}.
nlohmann::json anthropic_error_json(const ApiError& e);

class AnthropicDialect : public ResponseDialect {
 public:
  /// `id`: the message id ("msg_..."); `input_tokens`: the prompt's tokens (message_start's usage).
  AnthropicDialect(std::string id, std::string model, int64_t input_tokens)
      : id_(std::move(id)), model_(std::move(model)), input_tokens_(input_tokens) {}
  std::string stream_chunk(const nlohmann::json& chunk) override;
  std::string stream_end(int64_t prompt_tokens, int64_t completion_tokens) override;
  nlohmann::json response(const nlohmann::json& chat_completion) override;
  nlohmann::json error(const ApiError& e) const override { return anthropic_error_json(e); }

 private:
  std::string open_block(const std::string& type, const nlohmann::json& block);
  std::string close_block();
  std::string tool_id(size_t i) const;

  std::string id_, model_;
  int64_t input_tokens_;
  bool started_ = false, failed_ = false;
  int index_ = -1;            ///< the block open now (-1: none)
  int next_index_ = 0;
  std::string open_type_;     ///< "text" while a text block is open
  size_t tools_ = 0;          ///< tool_use blocks so far
  nlohmann::json stop_reason_, stop_sequence_;
};

}  // namespace tritium::server
