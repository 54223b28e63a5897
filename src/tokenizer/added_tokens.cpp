#include "tokenizer/added_tokens.h"

#include <unicode/uchar.h>

#include <algorithm>

#include "tokenizer/utf8.h"

namespace tritium {
namespace {

bool is_word_cp(uint32_t cp) { return cp == '_' || u_isalnum(static_cast<UChar32>(cp)); }
bool is_space_cp(uint32_t cp) { return u_isUWhiteSpace(static_cast<UChar32>(cp)); }

// Start offset of the UTF-8 character that ends at byte `end` (exclusive); text[..end] is valid UTF-8.
size_t prev_char_start(std::string_view text, size_t end) {
  size_t i = end - 1;
  while (i > 0 && (static_cast<uint8_t>(text[i]) & 0xC0) == 0x80) --i;
  return i;
}

uint32_t cp_at(std::string_view text, size_t i) {
  size_t len = 0;
  return utf8::decode(text, i, len);
}

}  // namespace

AddedTokenMatcher::AddedTokenMatcher(const std::vector<AddedToken>& all, bool normalized) : buckets_(256) {
  for (const auto& t : all)
    if (t.normalized == normalized && !t.content.empty()) tokens_.push_back(t);
  for (size_t i = 0; i < tokens_.size(); ++i)
    buckets_[static_cast<uint8_t>(tokens_[i].content[0])].push_back(static_cast<int>(i));
  for (auto& b : buckets_) {
    std::stable_sort(b.begin(), b.end(), [&](int x, int y) { return tokens_[x].content.size() > tokens_[y].content.size(); });
  }
}

void AddedTokenMatcher::split(std::string_view text, std::vector<Segment>& out) const {
  size_t last = 0;  // end of the previous match
  size_t pos = 0;
  while (pos < text.size()) {
    const AddedToken* hit = nullptr;
    for (int idx : buckets_[static_cast<uint8_t>(text[pos])]) {
      const AddedToken& t = tokens_[idx];
      if (text.compare(pos, t.content.size(), t.content) != 0) continue;
      hit = &t;
      break;  // longest first
    }
    if (!hit) {
      ++pos;
      continue;
    }
    size_t start = pos, stop = pos + hit->content.size();
    if (hit->single_word) {
      const bool left_ok = start == 0 || !is_word_cp(cp_at(text, prev_char_start(text, start)));
      const bool right_ok = stop == text.size() || !is_word_cp(cp_at(text, stop));
      if (!left_ok || !right_ok) {
        ++pos;
        continue;
      }
    }
    if (hit->lstrip) {
      while (start > last) {
        const size_t p = prev_char_start(text, start);
        if (!is_space_cp(cp_at(text, p))) break;
        start = p;
      }
    }
    if (hit->rstrip) {
      while (stop < text.size()) {
        size_t len = 0;
        const uint32_t cp = utf8::decode(text, stop, len);
        if (!is_space_cp(cp)) break;
        stop += len;
      }
    }
    if (start > last) out.push_back({std::string(text.substr(last, start - last)), -1});
    out.push_back({std::string(), hit->id});
    last = pos = stop;
  }
  if (last < text.size()) out.push_back({std::string(text.substr(last)), -1});
}

}  // namespace tritium
