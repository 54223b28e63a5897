// tritium tokenizer: tokenizer.json decoders (token strings -> bytes).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace tritium {

/// How token strings become output bytes.
struct Decoder {
  enum class Kind { Join, ByteLevel };
  Kind kind = Kind::Join;  // Join: no decoder, HF joins tokens with ' '
  /// Raw output bytes (may be invalid UTF-8: the caller repairs them). ByteLevel maps each token's
  /// characters back to bytes; a token with a character outside the byte alphabet is kept as is (HF).
  std::string decode(const std::vector<const std::string*>& tokens) const;
};

/// Reads a "decoder" value: ByteLevel, Sequence (of ByteLevel), or null. Throws tritium::Error naming
/// `where` for other types.
Decoder make_decoder(const nlohmann::json& j, const std::string& where);

}  // namespace tritium
