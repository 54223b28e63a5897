// tritium server: an OpenAI Responses request (POST /v1/responses) translated into a chat completions request,
// which parse_request (server/openai_protocol.h) then validates and turns into an engine request: the same
// sampling, limits, chat template, tool-call grammar and structured output as /v1/chat/completions.
//
// Spec: OpenAI's Responses API, "Create a model response" (the openai npm package's ResponseCreateParams).
// Translation, field by field:
//   input                  a string (one user message) or a list of items:
//     {"type": "message" (optional), "role": "user"|"assistant"|"system"|"developer", "content": string or
//      [{"type": "input_text"|"output_text", "text"}]}    -> a chat message ("developer" becomes "system");
//     {"type": "function_call", "call_id", "name", "arguments"} -> an assistant message's tool_calls entry
//      (consecutive calls, and calls right after an assistant message, share that message);
//     {"type": "function_call_output", "call_id", "output": string or [{"type": "input_text", "text"}]}
//      -> a "tool" message; its call_id must be that of an earlier function_call item of the input.
//   instructions           -> a system message before the input
//   tools                  [{"type": "function", "name", "description", "parameters", "strict"}] -> chat's
//                          [{"type": "function", "function": {"name", "description", "parameters"}}]
//   tool_choice            "auto" | "none" | "required" | {"type": "function", "name"}
//   text.format            {"type": "text"} | {"type": "json_object"} | {"type": "json_schema", "name", "schema",
//                          "description", "strict"} -> response_format
//   max_output_tokens      -> max_tokens;  temperature, top_p, stream, model -> the same chat fields
//   vLLM's sampling extras seed, top_k, min_p, repetition_penalty, presence_penalty, frequency_penalty -> the same
// Accepted and only echoed: metadata (an object of strings), user, safety_identifier, prompt_cache_key,
// prompt_cache_retention, parallel_tool_calls, store, stream_options, service_tier ("auto" / "default"),
// truncation ("disabled"), include ([]), reasoning (null / {}), background (false), top_logprobs (0),
// text.verbosity ("medium").
// No server-side state: nothing is stored whatever "store" says; previous_response_id, conversation, prompt and
// item_reference items are refused (400, the message says the server keeps no responses).
// Every refusal is an ApiError (400, param = the Responses field, e.g. "input", "tools", "text.format"): an
// unknown field, a wrong type, an unsupported item, content part, tool or format type, a function_call_output
// without its function_call.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace tritium::server {

/// The chat completions body for a Responses body. Throws ApiError (400) as above.
nlohmann::json responses_to_chat(const nlohmann::json& body);

/// The request's fields a Response object echoes, with their defaults: instructions, max_output_tokens,
/// metadata, parallel_tool_calls, temperature, top_p, tool_choice, tools (flat shape, description / parameters /
/// strict null when absent), text, store (false: nothing is stored), previous_response_id, reasoning, truncation,
/// background, service_tier, top_logprobs, user. Call it on a body responses_to_chat accepted.
nlohmann::json responses_echo(const nlohmann::json& body);

/// The Responses field that a chat completions field of the translation came from ("messages" -> "input",
/// "max_tokens" -> "max_output_tokens", "response_format" -> "text.format"; others unchanged), for errors that
/// parse_request or the engine raise about the translated body.
std::string responses_param(const std::string& chat_param);

}  // namespace tritium::server
