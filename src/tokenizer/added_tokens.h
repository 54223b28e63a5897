// tritium tokenizer: added/special tokens, matched in the text before pre-tokenization.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tritium {

/// One entry of tokenizer.json "added_tokens".
struct AddedToken {
  int32_t id = 0;
  std::string content;
  bool special = false;
  bool lstrip = false;       // the match also swallows whitespace on its left
  bool rstrip = false;       // ... and on its right
  bool single_word = false;  // only matches when not inside a word
  bool normalized = false;   // matched in normalized text (else in the raw input)
};

/// A run of text to tokenize, or one already-matched added token.
struct Segment {
  std::string text;
  int32_t id = -1;  // >= 0: an added token
};

/// Finds added tokens in text: at the leftmost position where one matches, the longest wins
/// (HF's leftmost-longest Aho-Corasick), honouring lstrip / rstrip / single_word.
class AddedTokenMatcher {
 public:
  /// Uses the tokens of `all` whose `normalized` flag equals `normalized`.
  AddedTokenMatcher(const std::vector<AddedToken>& all, bool normalized);
  bool empty() const { return tokens_.empty(); }
  /// Splits text into segments; empty text segments are not emitted, added tokens carry their id.
  void split(std::string_view text, std::vector<Segment>& out) const;

 private:
  std::vector<AddedToken> tokens_;
  std::vector<std::vector<int>> buckets_;  // first byte -> indices into tokens_, longest first
};

}  // namespace tritium
