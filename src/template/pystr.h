// tritium template engine: Python str semantics over UTF-8 strings (indices count code points).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tritium::tmpl::pystr {

/// Byte offset of every code point start, plus s.size() at the end (size() - 1 code points).
std::vector<size_t> code_point_offsets(const std::string& s);
/// Number of code points (Python len()).
size_t length(const std::string& s);
/// Python whitespace (ASCII subset plus \x1c-\x1f).
bool is_space(char c);
/// str.strip/lstrip/rstrip; chars unset strips whitespace, else any code point of *chars.
std::string strip(const std::string& s, const std::optional<std::string>& chars, bool left, bool right);
/// str.split(sep=None, maxsplit=-1).
std::vector<std::string> split(const std::string& s, const std::optional<std::string>& sep, int64_t maxsplit);
/// str.replace(old, new, count=-1).
std::string replace(const std::string& s, const std::string& from, const std::string& to, int64_t count);
std::string upper(std::string s);
std::string lower(std::string s);
/// str.capitalize(): first character upper case, the rest lower case (ASCII letters).
std::string capitalize(const std::string& s);
/// str.title() (ASCII letters).
std::string title(const std::string& s);
/// Python slice bounds: the indices selected by [start:stop:step] of a sequence of length n.
/// Throws tritium::Error when step is 0.
std::vector<size_t> slice_indices(int64_t n, std::optional<int64_t> start, std::optional<int64_t> stop,
                                  std::optional<int64_t> step);

}  // namespace tritium::tmpl::pystr
