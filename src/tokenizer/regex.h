// tritium tokenizer: a compiled PCRE2 pattern (UTF + Unicode properties, JIT) that lists its matches.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tritium {

/// A PCRE2 regular expression compiled with PCRE2_UTF | PCRE2_UCP (\s, \w, \d and case folding follow
/// Unicode, like Oniguruma in Hugging Face tokenizers). Thread-safe for matching.
class Regex {
 public:
  /// Compiles pattern; literal=true matches the text as is. Throws tritium::Error on a bad pattern,
  /// naming `where` (e.g. the JSON field).
  Regex(std::string_view pattern, bool literal, const std::string& where);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  /// Non-overlapping matches [begin, end) in byte offsets, left to right; empty matches are skipped.
  /// text must be valid UTF-8. Throws tritium::Error if the matcher fails (e.g. resource limits).
  std::vector<std::pair<size_t, size_t>> find_all(std::string_view text) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tritium
