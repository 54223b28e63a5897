// tritium grammar: regular expressions (the subset vLLM's guided_regex and JSON Schema "pattern" use, ECMAScript
// flavour) compiled to NFA fragments. Matching is over code points and always anchored (a leading ^ and
// trailing $ are accepted and ignored).
// Supported: literals, ".", classes "[...]" with ranges and negation, escapes \d \D \w \W \s \S \n \r \t \f \v
// \xHH \uHHHH and escaped metacharacters, groups "(...)" and "(?:...)", alternation "|", quantifiers * + ? {m}
// {m,} {m,n} (a trailing lazy "?" is ignored: the language is the same). Anything else (backreferences,
// lookaround, named groups, anchors inside the pattern) is a GrammarError naming it.
#pragma once

#include <memory>
#include <string_view>

#include "grammar/nfa.h"

namespace tritium::grammar {

class Regex {
 public:
  /// Parses `pattern`. Throws GrammarError with the position and what is unsupported.
  static Regex parse(std::string_view pattern);
  /// Builds the language (once per call: a fresh copy of states). json_string: every code point is written as
  /// it appears inside a JSON string literal ('"', '\\' and control characters escaped), for "pattern".
  Frag build(NfaBuilder& b, bool json_string) const;

  struct Node;

 private:
  std::shared_ptr<const Node> root_;
};

/// A code point as it is written inside a JSON string (RFC 8259: '"' '\\' and U+0000-U+001F escaped).
std::string json_escape_codepoint(uint32_t cp);
/// The fragment of any one code point of `ranges` written inside a JSON string.
Frag json_string_chars(NfaBuilder& b, const CodepointRanges& ranges);

}  // namespace tritium::grammar
