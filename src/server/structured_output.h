// tritium server: the structured-output fields of a request compiled to a token grammar (grammar/).
//
// OpenAI's response_format {"type": "json_object"} and {"type": "json_schema", "json_schema": {"name", "schema",
// "strict"}}, and vLLM's guided_json (a schema, object or string), guided_regex and guided_choice (a list of
// strings). At most one of them per request. guided_grammar and structural_tag are refused.
#pragma once

#include <nlohmann/json.hpp>

#include <memory>

#include "grammar/token_grammar.h"
#include "tokenizer/tokenizer.h"

namespace tritium::server {

/// The byte strings of every token of `tok` (special tokens: empty), as grammars need them.
std::shared_ptr<const grammar::Vocabulary> make_vocabulary(const Tokenizer& tok);

/// The grammar the body asks for, or null when it asks for none (or for response_format "text"). Throws
/// ApiError (400, param = the field, the message naming the unsupported keyword) for invalid or unsupported
/// schemas, patterns and choices.
std::shared_ptr<grammar::TokenGrammar> parse_structured_output(const nlohmann::json& body,
                                                              std::shared_ptr<const grammar::Vocabulary> vocab);

}  // namespace tritium::server
