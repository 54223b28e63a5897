// tritium server: the OpenAI API protocol — parsing and validating /v1/completions and /v1/chat/completions
// bodies into engine requests, and building responses, streaming chunks (SSE) and error JSON.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/engine.h"
#include "grammar/token_grammar.h"
#include "server/structured_output.h"
#include "server/tool_calls.h"
#include "template/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace tritium::server {

/// An API error: HTTP status and OpenAI error fields.
struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";  ///< invalid_request_error, authentication_error, not_found_error...
  std::string param;                           ///< offending field, or ""
  std::string code;                            ///< e.g. "context_length_exceeded", "model_not_found", or ""
};

/// {"error": {"message", "type", "param", "code"}} as OpenAI returns it (param/code null when empty).
nlohmann::json error_json(const ApiError& e);

/// Nesting levels (objects and arrays) a client's JSON document may have: a request body, and a JSON document
/// given as a string inside one (a guided_json schema). A JSON Schema at the grammar compiler's own bound (32
/// schema levels, two JSON levels each through "properties") inside a request's wrappers stays well within it.
inline constexpr int kMaxJsonDepth = 128;

/// Parses `text` as JSON, counting the nesting while parsing and stopping at the first level past `max_depth`, so
/// that a deep document costs neither time nor stack beyond that level (nlohmann's SAX parser is iterative; the
/// DOM built is never deeper than the bound). Returns false with `error` set for malformed JSON or too deep a
/// document; `too_deep` tells which.
bool parse_json_bounded(std::string_view text, nlohmann::json& out, std::string& error, bool* too_deep = nullptr,
                        int max_depth = kMaxJsonDepth);

/// A client's JSON body (or a JSON document inside a field): parse_json_bounded, a failure thrown as a 400
/// ApiError naming `param` ("" for the body) and, for a document too deep, the depth limit.
nlohmann::json parse_client_json(std::string_view text, const std::string& param = "");

/// What the parser needs from the server.
struct ProtocolContext {
  std::string model_name;
  const Tokenizer* tokenizer = nullptr;
  const ChatTemplate* chat_template = nullptr;  ///< null: chat completions are refused (400)
  std::string bos_token, eos_token;
  int64_t max_model_len = 0;
  /// Compiled structured-output grammars over the model's vocabulary (server/structured_output.h); null: refused.
  std::shared_ptr<GrammarCache> grammars;
  /// The chat template's tool-call syntax (server/tool_calls.h).
  ToolCallSyntax tool_syntax = ToolCallSyntax::kNone;
};

/// A parsed completion or chat completion request.
struct ParsedRequest {
  bool chat = false;
  bool stream = false;
  bool include_usage = false;  ///< stream_options.include_usage
  int n = 1;
  bool echo = false;
  /// Completions: logprobs count (-1 none). Chat: logprobs true -> top_logprobs count (0..20), else -1.
  int logprobs = -1;
  /// vLLM's prompt_logprobs: top count (-1 none); the choice then carries "prompt_logprobs".
  int prompt_logprobs = -1;
  std::vector<std::vector<int32_t>> prompts;   ///< one entry per prompt (a chat has one)
  std::vector<std::string> prompt_texts;       ///< the prompt text (for echo), "" for token prompts
  EngineRequest base;                          ///< prompt left empty; sampling, limits, stops
  /// Chat with tools (tool_choice not "none"): outputs are parsed for calls in this syntax (kNone: not parsed).
  ToolCallSyntax tool_syntax = ToolCallSyntax::kNone;
  bool tool_call_forced = false;  ///< tool_choice "required" or a named function: the grammar is one call
};

/// Parses a request body (already JSON). Throws ApiError (400 for bad fields, 404 for an unknown model;
/// the context check is the engine's).
ParsedRequest parse_request(const nlohmann::json& body, bool chat, const ProtocolContext& ctx);

/// Engine requests for choice i of prompt p (index p * n + i): the seed is offset by i so that n > 1 gives
/// n different but reproducible samples.
EngineRequest make_engine_request(const ParsedRequest& r, size_t prompt_index, int choice);

/// logprobs object of one choice for the tokens of `out` (completions or chat format). `text_offset`: the
/// characters (code points) of the choice's text before the first token; advanced past the tokens. Completions
/// with `prompt` (echo): the prompt's tokens come first, the first of them with null logprobs.
nlohmann::json logprobs_json(const std::vector<TokenLogprob>& lps, const Tokenizer& tok, bool chat,
                             size_t* text_offset = nullptr, const std::vector<int32_t>* prompt = nullptr,
                             const std::vector<TokenLogprob>* prompt_lps = nullptr);

/// A token as the API shows it: its text when its bytes are valid UTF-8, else "bytes:\xNN..." (OpenAI's form for
/// a token that is part of a character), so that distinct tokens never share a key.
std::string token_repr(const Tokenizer& tok, int32_t id);

/// vLLM's prompt_logprobs list: null for the first token, then {"<id>": {logprob, rank, decoded_token}} holding
/// the prompt token and the top ones.
nlohmann::json prompt_logprobs_json(const std::vector<TokenLogprob>& lps, const Tokenizer& tok);

/// The model id the API serves when --served-model-name is not given: the last component of the model's path
/// (trailing separators and "." resolved), "model" when there is none.
std::string default_model_id(const std::string& model_path);

/// message.tool_calls / delta.tool_calls entries (ids derived from the response id and the choice).
nlohmann::json tool_calls_json(const std::vector<ToolCall>& calls, const std::string& id, size_t choice);

/// The non-streaming response of finished choices (outs[k] is choice k). Each choice carries vLLM's
/// "stop_reason": the stop string that ended it, null otherwise (EOS, a stop token, length).
nlohmann::json build_response(const ParsedRequest& r, const std::vector<RequestOutput>& outs, const std::string& id,
                              int64_t created, const ProtocolContext& ctx);

/// One streaming chunk for choice `index` with new text (and logprobs), finish_reason (and "stop_reason", as in
/// build_response) when finished.
/// `text_offset`: the choice's characters streamed so far (logprobs.text_offset), advanced by this chunk.
nlohmann::json build_chunk(const ParsedRequest& r, int index, const RequestOutput& ev, bool first, const std::string& id,
                           int64_t created, const ProtocolContext& ctx, size_t& text_offset);

/// The final usage chunk (choices: []).
nlohmann::json build_usage_chunk(const ParsedRequest& r, int64_t prompt_tokens, int64_t completion_tokens,
                                 const std::string& id, int64_t created, const ProtocolContext& ctx);

/// vLLM's POST /tokenize: {"prompt": text, "add_special_tokens": true} or {"messages": [...],
/// "add_generation_prompt": true} (rendered with the chat template) -> {"count", "max_model_len", "tokens",
/// "token_strs"} (token_strs with "return_token_strs": true, else null). Throws ApiError like parse_request.
nlohmann::json tokenize_json(const nlohmann::json& body, const ProtocolContext& ctx);

/// vLLM's POST /detokenize: {"tokens": [ids]} -> {"prompt": text} (special tokens kept). Throws ApiError.
nlohmann::json detokenize_json(const nlohmann::json& body, const ProtocolContext& ctx);

/// CORS: the Access-Control-Allow-Origin value for a request's Origin under `allowed` ("*" allows any origin),
/// "" when the origin is not allowed or no origins are configured.
std::string cors_allow_origin(const std::vector<std::string>& allowed, const std::string& origin);

/// finish_reason for the API ("stop", "length"; "abort" and "error" stay as they are).
std::string api_finish_reason(const std::string& reason);

}  // namespace tritium::server
