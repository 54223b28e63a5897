// tritium tokenizer: tokenizer.json pre-tokenizers (Split, ByteLevel, Sequence).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace tritium {

/// Splits normalized text into pre-tokens (HF "pre_tokenizer"); BPE then runs on each piece alone.
class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  /// Replaces every piece by its sub-pieces (in order; empty pieces are dropped).
  virtual void apply(std::vector<std::string>& pieces) const = 0;
};

/// Builds a pre-tokenizer from a tokenizer.json "pre_tokenizer" value; nullptr for null.
/// Split: pattern {Regex|String}, behavior Removed/Isolated/MergedWithPrevious/MergedWithNext/Contiguous,
/// invert. ByteLevel: add_prefix_space, use_regex (the GPT-2 pattern), then maps bytes to the byte-level
/// alphabet. Sequence: "pretokenizers" in order. Throws tritium::Error naming `where` otherwise.
std::unique_ptr<PreTokenizer> make_pre_tokenizer(const nlohmann::json& j, const std::string& where);

}  // namespace tritium
