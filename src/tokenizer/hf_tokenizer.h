// tritium tokenizer: the concrete tokenizer.json pipeline (added tokens -> normalizer -> pre-tokenizer
// -> BPE -> post-processor; decoder for the way back).
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/decoder.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/post_processor.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace tritium {

/// The parts of a tokenizer.json, as tokenizer_json_loader.cpp builds them.
struct HfTokenizerParts {
  std::unique_ptr<BpeModel> model;
  std::vector<AddedToken> added;
  std::unique_ptr<Normalizer> normalizer;      // may be null
  std::unique_ptr<PreTokenizer> pre_tokenizer;  // may be null
  PostProcessor post;
  Decoder decoder;
  std::optional<int32_t> bos, eos;
};

class HfTokenizer final : public Tokenizer {
 public:
  explicit HfTokenizer(HfTokenizerParts parts);

  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens) const override;
  std::string decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const override;
  std::string decode_bytes(const std::vector<int32_t>& ids, bool skip_special_tokens) const override;
  int32_t vocab_size() const override { return vocab_size_; }
  std::optional<int32_t> token_to_id(std::string_view token) const override;
  std::string id_to_token(int32_t id) const override;
  bool is_special(int32_t id) const override;
  std::optional<int32_t> bos_id() const override { return p_.bos; }
  std::optional<int32_t> eos_id() const override { return p_.eos; }
  bool adds_bos() const override { return !p_.post.prefix.empty(); }
  void set_bos_eos(std::optional<int32_t> bos, std::optional<int32_t> eos) {
    p_.bos = bos;
    p_.eos = eos;
  }

 private:
  const std::string* token_ptr(int32_t id) const;
  void encode_text(const std::string& text, std::vector<int32_t>& out) const;

  HfTokenizerParts p_;
  AddedTokenMatcher raw_matcher_;   // added tokens with normalized=false, matched on the input
  AddedTokenMatcher norm_matcher_;  // normalized=true, matched after normalization
  std::unordered_map<std::string, int32_t> added_by_content_;
  std::unordered_map<int32_t, size_t> added_by_id_;  // id -> index in p_.added
  int32_t vocab_size_ = 0;
};

}  // namespace tritium
