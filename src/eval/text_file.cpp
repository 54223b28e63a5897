#include "eval/text_file.h"

#include "core/mapped_file.h"

namespace tritium {

std::string normalize_newlines(const std::string& in) {
  std::string out;
  out.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] == '\r') {
      out.push_back('\n');
      if (i + 1 < in.size() && in[i + 1] == '\n') ++i;
    } else {
      out.push_back(in[i]);
    }
  }
  return out;
}

std::string read_text_universal_newlines(const std::string& path) { return normalize_newlines(read_text_file(path)); }

}  // namespace tritium
