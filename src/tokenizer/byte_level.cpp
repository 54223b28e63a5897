#include "tokenizer/byte_level.h"

#include <array>

#include "tokenizer/utf8.h"

namespace tritium::byte_level {
namespace {

struct Tables {
  std::array<uint32_t, 256> cp{};          // byte -> code point
  std::array<std::string, 256> utf8{};     // byte -> UTF-8 of that code point
  std::array<int16_t, 324> byte_of_cp{};   // code point (< 324) -> byte, -1 if none

  Tables() {
    // GPT-2 bytes_to_unicode: printable ranges keep their value, the rest get 256, 257, ... in order.
    auto printable = [](int b) {
      return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    };
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) cp[b] = printable(b) ? static_cast<uint32_t>(b) : next++;
    byte_of_cp.fill(-1);
    for (int b = 0; b < 256; ++b) {
      utf8::append(utf8[b], cp[b]);
      byte_of_cp[cp[b]] = static_cast<int16_t>(b);
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

uint32_t char_of_byte(uint8_t b) { return tables().cp[b]; }

std::string encode(std::string_view bytes) {
  const Tables& t = tables();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) out += t.utf8[static_cast<uint8_t>(c)];
  return out;
}

std::optional<std::string> decode(std::string_view token) {
  const Tables& t = tables();
  std::string out;
  out.reserve(token.size());
  size_t i = 0;
  while (i < token.size()) {
    size_t len = 0;
    const uint32_t cp = utf8::decode(token, i, len);
    if (cp >= t.byte_of_cp.size() || t.byte_of_cp[cp] < 0) return std::nullopt;
    out.push_back(static_cast<char>(t.byte_of_cp[cp]));
    i += len;
  }
  return out;
}

}  // namespace tritium::byte_level
