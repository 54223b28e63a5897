#include "tokenizer/utf8.h"

namespace tritium::utf8 {
namespace {

// Expected total length from the lead byte (0 for bytes that cannot start a sequence).
int lead_length(uint8_t b) {
  if (b < 0x80) return 1;
  if (b >= 0xC2 && b <= 0xDF) return 2;
  if (b >= 0xE0 && b <= 0xEF) return 3;
  if (b >= 0xF0 && b <= 0xF4) return 4;
  return 0;
}

// Valid range of the second byte given the lead byte (Unicode Table 3-7).
bool second_ok(uint8_t lead, uint8_t b) {
  switch (lead) {
    case 0xE0: return b >= 0xA0 && b <= 0xBF;
    case 0xED: return b >= 0x80 && b <= 0x9F;
    case 0xF0: return b >= 0x90 && b <= 0xBF;
    case 0xF4: return b >= 0x80 && b <= 0x8F;
    default: return b >= 0x80 && b <= 0xBF;
  }
}

// How many bytes starting at s[i] form a valid prefix of a sequence (the maximal subpart), and the
// sequence's full length. prefix == need means a complete sequence.
void scan(std::string_view s, size_t i, int& need, int& prefix) {
  const auto lead = static_cast<uint8_t>(s[i]);
  need = lead_length(lead);
  prefix = need == 0 ? 0 : 1;
  for (int k = 1; k < need; ++k) {
    if (i + k >= s.size()) return;
    const auto b = static_cast<uint8_t>(s[i + k]);
    const bool ok = k == 1 ? second_ok(lead, b) : (b >= 0x80 && b <= 0xBF);
    if (!ok) return;
    prefix = k + 1;
  }
}

}  // namespace

size_t valid_sequence_length(std::string_view s, size_t i) {
  int need = 0, prefix = 0;
  scan(s, i, need, prefix);
  return need > 0 && prefix == need ? static_cast<size_t>(need) : 0;
}

size_t find_invalid(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    if (static_cast<uint8_t>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    const size_t n = valid_sequence_length(s, i);
    if (n == 0) return i;
    i += n;
  }
  return std::string_view::npos;
}

std::string lossy(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    int need = 0, prefix = 0;
    scan(s, i, need, prefix);
    if (need > 0 && prefix == need) {
      out.append(s.substr(i, need));
      i += need;
    } else {
      out.append("\xEF\xBF\xBD");
      i += prefix > 0 ? prefix : 1;
    }
  }
  return out;
}

size_t incomplete_tail(std::string_view s) {
  const size_t lo = s.size() >= 3 ? s.size() - 3 : 0;
  for (size_t i = s.size(); i-- > lo;) {
    const auto b = static_cast<uint8_t>(s[i]);
    if (b >= 0x80 && b <= 0xBF) continue;  // continuation byte: keep looking for the lead
    int need = 0, prefix = 0;
    scan(s, i, need, prefix);
    const size_t have = s.size() - i;
    return need > 1 && prefix == static_cast<int>(have) && have < static_cast<size_t>(need) ? have : 0;
  }
  return 0;
}

void append(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

uint32_t decode(std::string_view s, size_t i, size_t& len) {
  const auto b0 = static_cast<uint8_t>(s[i]);
  if (b0 < 0x80) {
    len = 1;
    return b0;
  }
  len = static_cast<size_t>(lead_length(b0));
  if (len == 0 || i + len > s.size()) {  // not valid here: treat the byte as Latin-1 so callers make progress
    len = 1;
    return b0;
  }
  uint32_t cp = b0 & (len == 2 ? 0x1F : len == 3 ? 0x0F : 0x07);
  for (size_t k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<uint8_t>(s[i + k]) & 0x3F);
  return cp;
}

}  // namespace tritium::utf8
