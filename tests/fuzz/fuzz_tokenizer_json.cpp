// libFuzzer target: tokenizer.json loading (tokenizer/) on arbitrary bytes, then encoding and decoding a fixed
// text with whatever tokenizer was accepted (normalizers, pre-tokenizer regexes, BPE merges, added tokens,
// post-processors, decoders). The only acceptable failure is a tritium::Error. Seeds: tests/fuzz/tokenizer_json/.
#include <cstddef>
#include <cstdint>

#include "core/error.h"
#include "fuzz_util.h"
#include "tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = tritium::fuzz::scratch_file("tokenizer.json", data, size);
  try {
    auto tok = tritium::Tokenizer::from_file(path);
    const auto ids = tok->encode("Hello wörld, 12345 <|begin_of_text|> \xe2\x82\xac\n\n  tabs\there", true);
    (void)tok->decode(ids, false);
    (void)tok->decode(ids, true);
    (void)tok->decode_bytes(ids, false);
    for (int32_t id : {0, 1, tok->vocab_size() - 1}) {
      if (id < 0 || id >= tok->vocab_size()) continue;
      (void)tok->id_to_token(id);
      (void)tok->decode({id}, false);
    }
  } catch (const tritium::Error&) {
  }
  return 0;
}
