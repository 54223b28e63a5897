// tritium tokenizer: Hugging Face tokenizer.json byte-level BPE (Llama 3, Qwen2/3, GPT-2 style).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace tritium {

/// A byte-level BPE tokenizer loaded from a Hugging Face tokenizer.json.
/// Supports: normalizer none/NFC, pre-tokenizers Split (PCRE2 regex) / ByteLevel / Sequence,
/// BPE with merges ("a b" strings or [a, b] pairs) and ignore_merges, added/special tokens matched
/// before pre-tokenization, post-processors TemplateProcessing / ByteLevel / Sequence, ByteLevel decoder.
class Tokenizer {
 public:
  /// Loads tokenizer.json (and, when present beside it, tokenizer_config.json for bos/eos names).
  /// Throws tritium::Error naming the file and field on malformed or unsupported content.
  static std::unique_ptr<Tokenizer> from_file(const std::string& tokenizer_json_path);
  /// Builds a tokenizer from a tokenizer.json object already in memory (e.g. one made from GGUF metadata); `where`
  /// names it in messages. bos / eos play tokenizer_config.json's part (ids must be tokens of j); without a bos,
  /// the post-processor template's first added id is the BOS, as in from_file.
  static std::unique_ptr<Tokenizer> from_json(const nlohmann::json& j, const std::string& where,
                                              std::optional<int32_t> bos, std::optional<int32_t> eos);
  virtual ~Tokenizer() = default;

  /// Encodes UTF-8 text. add_special_tokens applies the post-processor template (e.g. BOS).
  /// Throws tritium::Error on invalid UTF-8 input.
  virtual std::vector<int32_t> encode(std::string_view text, bool add_special_tokens) const = 0;
  /// Decodes ids to UTF-8 text (invalid byte sequences become U+FFFD, as HF does).
  virtual std::string decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const = 0;
  /// The decoder's raw output bytes before UTF-8 repair (may end inside a multi-byte character);
  /// used by IncrementalDecoder. Unknown ids are skipped, as in decode.
  virtual std::string decode_bytes(const std::vector<int32_t>& ids, bool skip_special_tokens) const = 0;

  virtual int32_t vocab_size() const = 0;
  /// Id of a token string (vocab or added token), if any.
  virtual std::optional<int32_t> token_to_id(std::string_view token) const = 0;
  /// Raw token string (byte-level form) of an id; empty when out of range.
  virtual std::string id_to_token(int32_t id) const = 0;
  virtual bool is_special(int32_t id) const = 0;
  /// BOS/EOS ids from tokenizer_config.json (bos_token / eos_token), if known.
  virtual std::optional<int32_t> bos_id() const = 0;
  virtual std::optional<int32_t> eos_id() const = 0;
  /// Whether encode(..., add_special_tokens=true) prepends BOS (post-processor template).
  virtual bool adds_bos() const = 0;
};

/// Streaming detokenizer: push ids one at a time, get back only complete UTF-8 text
/// (never a split multi-byte sequence). flush() returns whatever is left at the end.
class IncrementalDecoder {
 public:
  explicit IncrementalDecoder(const Tokenizer& tok, bool skip_special_tokens = true);
  /// Returns the new text made complete by this id (possibly empty).
  std::string push(int32_t id);
  /// Returns any remaining text (incomplete sequences become U+FFFD).
  std::string flush();

 private:
  const Tokenizer& tok_;
  bool skip_special_;
  std::vector<int32_t> ids_;  // window: one already-emitted context id (if any) + pending ids
  size_t emitted_bytes_ = 0;  // bytes of decode_bytes(ids_) already emitted
};

}  // namespace tritium
