// tritium server: Anthropic Messages API requests (POST /v1/messages, /v1/messages/count_tokens) translated into a
// chat completions body, which parse_request (server/openai_protocol.h) then validates and turns into engine
// requests: the same chat template, sampling, stop strings, tool-call grammar.
//
// Fields (https://docs.anthropic.com/en/api/messages): model (string, required), max_tokens (integer >= 1,
// required for /v1/messages, not read by count_tokens), system (string or a list of {"type": "text", "text"}
// blocks, joined with "\n" -> the first message, role "system"), messages (non-empty list of {"role": "user" |
// "assistant", "content": string | blocks}; consecutive turns of one role are one turn, as Anthropic merges them;
// the first turn is the user's; a last assistant turn (prefill) is refused), stop_sequences (list of strings ->
// stop), temperature [0, 1], top_p, top_k, stream (bool), metadata (object, ignored), thinking ({"type":
// "enabled" | "disabled" | "adaptive"}, accepted and ignored: no thinking blocks are returned), tools (list of
// {"name", "description", "input_schema"} -> function tools; server tools with another "type" are refused),
// tool_choice ({"type": "auto" | "any" | "tool" (with "name") | "none"} -> "auto" / "required" / the named
// function / "none"; disable_parallel_tool_use accepted). Other top-level fields are ignored, as the chat path
// ignores them. "cache_control" and "citations" on blocks are accepted and ignored.
// Blocks: user turns take "text" and "tool_result" ({"tool_use_id", "content": string | text blocks,
// "is_error"} -> a "tool" message, its content prefixed with "Error: " when is_error); assistant turns take
// "text", "tool_use" ({"id", "name", "input": object} -> tool_calls, arguments the input as JSON text), and
// "thinking" / "redacted_thinking" (dropped). "image" and "document" blocks: 400 "not supported by this model";
// any other block type: 400. A tool_result must name the id of a tool_use of an earlier assistant turn.
// Errors: ApiError 400 (invalid_request_error) naming the field, e.g. "messages[1].content[0].tool_use_id".
#pragma once

#include <nlohmann/json.hpp>

namespace tritium::server {

/// The chat completions body for a Messages API body. `count_tokens`: the /v1/messages/count_tokens form
/// (max_tokens not required, sampling fields not read). Throws ApiError (400) for malformed input.
nlohmann::json anthropic_to_chat(const nlohmann::json& body, bool count_tokens = false);

}  // namespace tritium::server
