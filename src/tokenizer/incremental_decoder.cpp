// IncrementalDecoder: streaming detokenization that never splits a UTF-8 character.
#include <algorithm>

#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace tritium {

IncrementalDecoder::IncrementalDecoder(const Tokenizer& tok, bool skip_special_tokens)
    : tok_(tok), skip_special_(skip_special_tokens) {}

std::string IncrementalDecoder::push(int32_t id) {
  ids_.push_back(id);
  const std::string bytes = tok_.decode_bytes(ids_, skip_special_);
  emitted_bytes_ = std::min(emitted_bytes_, bytes.size());
  const size_t tail = utf8::incomplete_tail(bytes);
  const size_t end = bytes.size() - tail;
  std::string out;
  if (end > emitted_bytes_) out = utf8::lossy(std::string_view(bytes).substr(emitted_bytes_, end - emitted_bytes_));
  if (tail == 0) {
    // Clean boundary: keep only this id as context for the next one (decoders may look at neighbours).
    ids_.assign(1, id);
    emitted_bytes_ = tok_.decode_bytes(ids_, skip_special_).size();
  } else {
    emitted_bytes_ = std::max(emitted_bytes_, end);
  }
  return out;
}

std::string IncrementalDecoder::flush() {
  const std::string bytes = tok_.decode_bytes(ids_, skip_special_);
  std::string out = utf8::lossy(std::string_view(bytes).substr(std::min(emitted_bytes_, bytes.size())));
  ids_.clear();
  emitted_bytes_ = 0;
  return out;
}

}  // namespace tritium
