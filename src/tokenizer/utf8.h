// tritium tokenizer: UTF-8 validation, lossy repair (U+FFFD) and boundary helpers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tritium::utf8 {

/// Length in bytes of the valid UTF-8 sequence starting at s[i], or 0 when the bytes there are not a
/// complete well-formed sequence (RFC 3629: no overlongs, no surrogates, max U+10FFFF).
size_t valid_sequence_length(std::string_view s, size_t i);

/// Byte offset of the first invalid UTF-8 byte in s, or std::string_view::npos when s is valid.
size_t find_invalid(std::string_view s);

/// Replaces every maximal invalid subpart with U+FFFD (the Unicode "substitution of maximal subparts"
/// practice, as Rust's String::from_utf8_lossy and hence Hugging Face tokenizers do).
std::string lossy(std::string_view s);

/// Number of bytes at the end of s that form an incomplete but so-far-valid UTF-8 sequence
/// (0 when s ends on a character boundary or the tail is already invalid). 0..3.
size_t incomplete_tail(std::string_view s);

/// Appends the UTF-8 encoding of code point cp (<= U+10FFFF) to out.
void append(std::string& out, uint32_t cp);

/// Decodes the code point at s[i] (s must be valid UTF-8 there); sets len to its byte length.
uint32_t decode(std::string_view s, size_t i, size_t& len);

}  // namespace tritium::utf8
