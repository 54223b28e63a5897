// tritium tokenizer: the BPE model of a tokenizer.json (vocab + ranked merges).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace tritium {

/// Byte-pair encoding (Sennrich et al. 2016) as Hugging Face tokenizers applies it: a pre-token is
/// split into characters, then the adjacent pair with the lowest merge rank is merged (leftmost first
/// on ties) until no merge applies. With ignore_merges, a pre-token found whole in the vocab maps
/// directly to its id.
class BpeModel {
 public:
  /// Parses the tokenizer.json "model" object (type BPE; vocab {token: id}; merges as "a b" strings or
  /// [a, b] pairs; ignore_merges; unk_token; byte_fallback). Throws tritium::Error naming `where` and the
  /// field on malformed content (e.g. a merge whose parts are not in the vocab).
  BpeModel(const nlohmann::json& model, const std::string& where);

  /// Appends the ids of one pre-token (already in the model's alphabet, e.g. byte-level) to out.
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;

  /// Vocab size = (largest id + 1).
  int32_t size() const { return static_cast<int32_t>(id_to_token_.size()); }
  std::optional<int32_t> token_to_id(std::string_view token) const;
  /// Token string of id; nullptr when out of range or unassigned.
  const std::string* id_to_token(int32_t id) const;

 private:
  struct Merge {
    int32_t rank;
    int32_t id;  // id of the merged token
  };
  static uint64_t key(int32_t a, int32_t b) { return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b); }
  void add_char(std::string_view ch, std::vector<int32_t>& syms) const;

  std::unordered_map<std::string, int32_t> vocab_;
  std::vector<std::string> id_to_token_;
  std::vector<uint8_t> assigned_;
  std::unordered_map<uint64_t, Merge> merges_;
  bool ignore_merges_ = false;
  bool byte_fallback_ = false;
  std::optional<int32_t> unk_id_;
  bool fuse_unk_ = false;
};

}  // namespace tritium
