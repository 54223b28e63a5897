// tritium tokenizer: tokenizer.json normalizers (Unicode normal forms via ICU, Sequence).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

namespace tritium {

/// Rewrites text before pre-tokenization (HF "normalizer").
class Normalizer {
 public:
  virtual ~Normalizer() = default;
  /// text must be valid UTF-8; returns valid UTF-8.
  virtual std::string normalize(std::string_view text) const = 0;
};

/// Builds the normalizer of a tokenizer.json "normalizer" value; nullptr for null.
/// Supported types: NFC, NFD, NFKC, NFKD (ICU), Sequence. Throws tritium::Error naming `where` otherwise.
std::unique_ptr<Normalizer> make_normalizer(const nlohmann::json& j, const std::string& where);

}  // namespace tritium
