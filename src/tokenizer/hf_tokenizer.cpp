#include "tokenizer/hf_tokenizer.h"

#include <algorithm>

#include "core/error.h"
#include "tokenizer/utf8.h"

namespace tritium {

HfTokenizer::HfTokenizer(HfTokenizerParts parts)
    : p_(std::move(parts)), raw_matcher_(p_.added, false), norm_matcher_(p_.added, true) {
  vocab_size_ = p_.model->size();
  for (size_t i = 0; i < p_.added.size(); ++i) {
    const AddedToken& t = p_.added[i];
    added_by_content_[t.content] = t.id;
    added_by_id_[t.id] = i;
    vocab_size_ = std::max(vocab_size_, t.id + 1);
  }
}

void HfTokenizer::encode_text(const std::string& text, std::vector<int32_t>& out) const {
  std::vector<std::string> pieces{text};
  if (p_.pre_tokenizer) p_.pre_tokenizer->apply(pieces);
  for (const auto& piece : pieces) p_.model->encode_word(piece, out);
}

std::vector<int32_t> HfTokenizer::encode(std::string_view text, bool add_special_tokens) const {
  const size_t bad = utf8::find_invalid(text);
  if (bad != std::string_view::npos) fail("invalid UTF-8 in input at byte {}", bad);

  std::vector<Segment> raw;
  if (raw_matcher_.empty()) raw.push_back({std::string(text), -1});
  else raw_matcher_.split(text, raw);

  std::vector<int32_t> ids;
  if (add_special_tokens) ids = p_.post.prefix;
  for (auto& seg : raw) {
    if (seg.id >= 0) {
      ids.push_back(seg.id);
      continue;
    }
    std::string norm = p_.normalizer ? p_.normalizer->normalize(seg.text) : std::move(seg.text);
    if (norm_matcher_.empty()) {
      encode_text(norm, ids);
      continue;
    }
    std::vector<Segment> sub;
    norm_matcher_.split(norm, sub);
    for (const auto& s : sub) {
      if (s.id >= 0) ids.push_back(s.id);
      else encode_text(s.text, ids);
    }
  }
  if (add_special_tokens) ids.insert(ids.end(), p_.post.suffix.begin(), p_.post.suffix.end());
  return ids;
}

const std::string* HfTokenizer::token_ptr(int32_t id) const {
  auto it = added_by_id_.find(id);
  if (it != added_by_id_.end()) return &p_.added[it->second].content;
  return p_.model->id_to_token(id);
}

std::string HfTokenizer::decode_bytes(const std::vector<int32_t>& ids, bool skip_special_tokens) const {
  std::vector<const std::string*> toks;
  toks.reserve(ids.size());
  for (int32_t id : ids) {
    if (skip_special_tokens && is_special(id)) continue;
    if (const std::string* t = token_ptr(id)) toks.push_back(t);
  }
  return p_.decoder.decode(toks);
}

std::string HfTokenizer::decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const {
  return utf8::lossy(decode_bytes(ids, skip_special_tokens));
}

std::optional<int32_t> HfTokenizer::token_to_id(std::string_view token) const {
  auto it = added_by_content_.find(std::string(token));
  if (it != added_by_content_.end()) return it->second;
  return p_.model->token_to_id(token);
}

std::string HfTokenizer::id_to_token(int32_t id) const {
  const std::string* t = token_ptr(id);
  return t ? *t : std::string();
}

bool HfTokenizer::is_special(int32_t id) const {
  auto it = added_by_id_.find(id);
  return it != added_by_id_.end() && p_.added[it->second].special;
}

}  // namespace tritium
