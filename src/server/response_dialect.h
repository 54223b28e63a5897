// tritium server: another API's view of a chat completion. /v1/responses (OpenAI Responses) and /v1/messages
// (Anthropic Messages) translate their request into a chat completion request (the same parser, engine requests,
// tool-call grammar and structured output), and a ResponseDialect rewrites what the chat completion call writes:
// each chat.completion.chunk (streaming) into the dialect's own SSE events, the chat.completion object
// (non-streaming) into its response object, and errors into its error shape.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

#include "server/openai_protocol.h"

namespace tritium::server {

class ResponseDialect {
 public:
  virtual ~ResponseDialect() = default;
  /// The SSE text (zero or more complete "event: ...\ndata: ...\n\n" records) for one chat.completion.chunk of
  /// choice 0. The first chunk of a stream comes first; a chunk with finish_reason set is the choice's last.
  virtual std::string stream_chunk(const nlohmann::json& chunk) = 0;
  /// The SSE text that ends the stream, after the last chunk: token counts of the whole call.
  virtual std::string stream_end(int64_t prompt_tokens, int64_t completion_tokens) = 0;
  /// The non-streaming body for the finished chat.completion object (with its "usage").
  virtual nlohmann::json response(const nlohmann::json& chat_completion) = 0;
  /// An error in the dialect's own shape (the HTTP status is e.status).
  virtual nlohmann::json error(const ApiError& e) const = 0;
};

}  // namespace tritium::server
