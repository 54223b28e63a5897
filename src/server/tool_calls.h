// tritium server: OpenAI tool calls on chat completions — which syntax the model's chat template uses, the
// grammar of one call (tool_choice "required" or a named function), and the parsing of a finished output into
// message.tool_calls.
// Syntaxes: Hermes / Qwen2.5 / Qwen3 templates (they mention "<tool_call>"): <tool_call>\n{"name": ..., "arguments":
// {...}}\n</tool_call>, one block per call; Llama 3.1+ templates (they mention "parameters" and
// "<|python_tag|>" or "ipython"): the whole message is {"name": ..., "parameters": {...}}. Other templates: tools
// are rendered as the template renders them (or not at all), "auto" leaves the output as content, and "required" /
// a named function constrain the output to a JSON list of calls [{"name": ..., "parameters": {...}}, ...]
// (vLLM's form for a forced call), returned as tool_calls.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "grammar/nfa.h"

namespace tritium::server {

/// kJsonList is never detected from a template: it is the syntax of a forced call on a kNone template.
enum class ToolCallSyntax { kNone, kHermes, kLlama3, kJsonList };

ToolCallSyntax detect_tool_call_syntax(const std::string& chat_template_source);

struct ToolCall {
  std::string name;
  std::string arguments;  ///< JSON text (OpenAI's function.arguments is a string)
};

/// Checks a request's "tools" (null or absent: none): an array of {"type": "function", "function": {"name",
/// "description", "parameters"}} objects ("type" may be left out), whose parameters, when given, are a JSON Schema
/// object: every "type" a JSON type name (or a list of them), "properties" / "$defs" / "definitions" objects of
/// schemas, "items" / "additionalProperties" / "not" schemas, "anyOf" / "allOf" / "oneOf" / "prefixItems" lists of
/// schemas, "required" a list of strings, throughout the schema. Throws ApiError (400, param "tools") naming the
/// place, e.g. "tools[0].function.parameters.properties: must be an object of schemas".
void check_tools(const nlohmann::json& body);

/// The grammar of one call of the tools the request allows (kJsonList: a list of calls, one or more when
/// `parallel`, exactly one otherwise): all of `tools` (the request's "tools" array), or only `only` when non-empty.
/// Throws ApiError (400, param "tools" / "tool_choice") for malformed tools, an unknown name, a parameters schema
/// the grammar does not support, or syntax kNone.
grammar::Nfa tool_call_grammar(const nlohmann::json& tools, const std::string& only, ToolCallSyntax syntax,
                               bool parallel = true);

/// The calls in a finished output; `content` receives the text outside them ("" when there is none). No call
/// (an output that does not follow the syntax) returns an empty list and the whole text as content.
std::vector<ToolCall> parse_tool_calls(const std::string& text, ToolCallSyntax syntax, std::string& content);

/// The text a streamed output starts with when it is a call ("<tool_call>", "{" or "["), "" for kNone.
std::string tool_call_marker(ToolCallSyntax syntax);

}  // namespace tritium::server
