// tritium server: the structured-output fields of a request compiled to a token grammar (grammar/).
//
// OpenAI's response_format {"type": "json_object"} and {"type": "json_schema", "json_schema": {"name", "schema",
// "strict"}}, and vLLM's guided_json (a schema, object or string), guided_regex and guided_choice (a list of
// strings). At most one of them per request. guided_grammar and structural_tag are refused.
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>

#include "grammar/token_grammar.h"
#include "tokenizer/tokenizer.h"

namespace tritium::server {

/// The byte strings of every token of `tok` (special tokens: empty), as grammars need them.
std::shared_ptr<const grammar::Vocabulary> make_vocabulary(const Tokenizer& tok);

/// Compiled grammars by their specification (least recently used dropped past `capacity`): requests with the same
/// schema share one TokenGrammar, and with it its DFA states and token masks, so a schema's masks are computed
/// once for all its requests. Thread-safe.
class GrammarCache {
 public:
  explicit GrammarCache(std::shared_ptr<const grammar::Vocabulary> vocab, size_t capacity = 64)
      : vocab_(std::move(vocab)), capacity_(capacity) {}
  const std::shared_ptr<const grammar::Vocabulary>& vocab() const { return vocab_; }
  /// The grammar for `key`, compiled by make() (outside the lock) when not cached. make's exceptions pass through.
  std::shared_ptr<grammar::TokenGrammar> get(const std::string& key, const std::function<grammar::Nfa()>& make);

 private:
  std::shared_ptr<const grammar::Vocabulary> vocab_;
  size_t capacity_;
  std::mutex mu_;
  std::list<std::pair<std::string, std::shared_ptr<grammar::TokenGrammar>>> lru_;  ///< most recent first
};

/// The grammar the body asks for, or null when it asks for none (or for response_format "text"). Throws
/// ApiError (400, param = the field, the message naming the unsupported keyword) for invalid or unsupported
/// schemas, patterns and choices, and when `cache` is null.
std::shared_ptr<grammar::TokenGrammar> parse_structured_output(const nlohmann::json& body, GrammarCache* cache);

}  // namespace tritium::server
