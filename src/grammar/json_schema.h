// tritium grammar: JSON Schema (the subset OpenAI's structured outputs accept) and "any JSON object" compiled to a
// byte NFA whose language is compact JSON text valid for the schema (an optional single space after ':' and ',').
//
// Supported: type (one or a list), properties + required (properties are written in the schema's key order,
// optional ones may be left out), additionalProperties (false, or a schema for objects without properties),
// items, prefixItems, minItems / maxItems, enum, const, string minLength / maxLength / pattern / format (date,
// time, date-time, duration, uuid, email, hostname, ipv4, ipv6; other formats are annotations), number, integer,
// boolean, null, anyOf, allOf of one schema, $ref to "#", "#/$defs/..." or "#/definitions/..." (recursion
// expanded to max_ref_depth levels, deeper alternatives dropped), nullable, boolean schemas, and the annotations
// title, description, default, examples, $schema, $id, $comment, deprecated, readOnly, writeOnly.
// Numbers: minimum, maximum, exclusiveMinimum, exclusiveMaximum (numeric, or draft 4's boolean form) and multipleOf
// are compiled exactly (grammar/number_range.h): integers within int64 without leading zeros or "-0", moduli up
// to 10000 for any range, larger ones listed when at most 1000 multiples lie in range; bounded numbers without
// exponent, integer part below 2^63, at most 15 fraction digits (more when a bound has more); multipleOf on a
// number as an integer or 0.1, 0.01, .... They constrain numbers only; a schema with them and no type is a
// number; enum / const members that fail them are dropped. Unbounded integers and numbers keep at most 16
// integer digits. Formats hold subsets where noted in format_regexes (days up to 28, hostnames of 1-6 labels).
// Refused with a GrammarError naming the keyword, never ignored: multipleOf on a number other than an integer or
// a power of ten below one, a multipleOf above 10000 with more than 1000 multiples in range, 'pattern' together
// with minLength / maxLength (their intersection is not built), 'allOf' repeating a numeric keyword with another
// value, and every other keyword that would constrain the output (oneOf, not, if/then/else, uniqueItems,
// minProperties, patternProperties, ...).
// Values with no schema ({} or "json_object") are any JSON nested up to any_json_depth levels.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "grammar/nfa.h"

namespace tritium::grammar {

struct JsonSchemaOptions {
  int max_ref_depth = 3;      ///< expansions of one recursive $ref along a path
  int any_json_depth = 3;     ///< nesting of objects / arrays in values without a schema
  int max_nesting = 32;       ///< nesting of the schema itself (deeper: GrammarError)
  size_t max_states = 400000;  ///< automaton budget (NfaBuilder)
};

/// The language of JSON texts valid under `schema`. Throws GrammarError.
Nfa compile_json_schema(const nlohmann::json& schema, const JsonSchemaOptions& opts = {});
/// One function call written as prefix + {"name": "<name>", "<args_key>": <JSON valid for the parameters schema>}
/// + suffix, for any of `tools` (name, parameters schema; a null schema = any JSON object). Tool calling with
/// tool_choice "required" or a named function (e.g. Qwen's <tool_call>\n...\n</tool_call> with "arguments").
Nfa compile_tool_call(const std::vector<std::pair<std::string, nlohmann::json>>& tools, const std::string& prefix,
                      const std::string& args_key, const std::string& suffix, const JsonSchemaOptions& opts = {});
/// One to `max_calls` (-1: any number of) function calls as a JSON array [{"name": "<name>", "<args_key>": <JSON
/// valid for the parameters schema>}, ...] (elements separated by ", "), each of any of `tools`: a forced tool call
/// on a model whose chat template has no call syntax of its own (vLLM's form for tool_choice "required").
/// Throws GrammarError.
Nfa compile_tool_call_list(const std::vector<std::pair<std::string, nlohmann::json>>& tools, const std::string& args_key,
                           int max_calls = -1, const JsonSchemaOptions& opts = {});
/// response_format json_object: any JSON object.
Nfa compile_json_object(const JsonSchemaOptions& opts = {});
/// guided_regex: the whole output matches `pattern` (grammar/regex.h).
Nfa compile_regex(const std::string& pattern, size_t max_states = 400000);
/// guided_choice: the output is exactly one of `choices` (non-empty).
Nfa compile_choice(const std::vector<std::string>& choices, size_t max_states = 400000);

}  // namespace tritium::grammar
