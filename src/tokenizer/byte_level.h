// tritium tokenizer: the GPT-2 byte-level alphabet (every byte <-> one printable Unicode character).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tritium::byte_level {

/// Maps raw bytes to their byte-level form: each byte becomes the UTF-8 encoding of its GPT-2
/// character (printable Latin-1 bytes map to themselves, the others to U+0100 and up; ' ' -> 'Ġ').
std::string encode(std::string_view bytes);

/// Maps a byte-level token back to raw bytes; nullopt when some character is outside the alphabet.
std::optional<std::string> decode(std::string_view token);

/// The GPT-2 character (code point) of byte b.
uint32_t char_of_byte(uint8_t b);

}  // namespace tritium::byte_level
