// tritium eval: reading evaluation texts the way the reference tools see them.
#pragma once

#include <string>

namespace tritium {

/// Reads a UTF-8 text file with universal newlines, as Python's open(path).read() does (\r\n and lone \r
/// become \n), which is how Hugging Face / lm-eval reference numbers see a file. Throws tritium::Error naming the
/// path when it cannot be read.
std::string read_text_universal_newlines(const std::string& path);

/// Universal-newline translation of a string (see above).
std::string normalize_newlines(const std::string& in);

}  // namespace tritium
