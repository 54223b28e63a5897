// libFuzzer target: the GGUF reader (io/gguf.h) on arbitrary bytes, then everything a loader does with what it
// accepts: every metadata value rendered and every array element read, every tensor's shape and extent, and the
// float / ternary decoders (formats/gguf_quants.h) run over tensors up to 1 MiB. The only acceptable failure is a
// tritium::Error; a crash, a sanitizer report, a hang or a huge allocation is a bug. Seeds: tests/fuzz/gguf/.
// Built with -DTRITIUM_FUZZ=ON and clang; scripts/fuzz.sh runs it.
#include <cstddef>
#include <cstdint>

#include "core/error.h"
#include "formats/gguf_quants.h"
#include "io/gguf.h"

namespace {

void touch(const tritium::GgufValue& v, int depth) {
  (void)v.summary();
  (void)v.to_uint();
  (void)v.to_int();
  (void)v.to_float();
  (void)v.to_string();
  if (v.type() != tritium::GgufType::kArray) return;
  const uint64_t n = v.size() < 64 ? v.size() : 64;
  for (uint64_t i = 0; i < n; ++i) touch(v.at(i), depth + 1);
  if (v.size() > 0) touch(v.at(v.size() - 1), depth + 1);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const tritium::GgufFile f = tritium::GgufFile::parse(data, size, "fuzz.gguf");
    for (const auto& [key, value] : f.metadata()) {
      touch(value, 0);
      (void)f.find_string(key);
    }
    for (const auto& key : {"tokenizer.ggml.tokens", "tokenizer.ggml.token_type", "general.alignment"}) {
      try {
        (void)f.get_string_array(key);
      } catch (const tritium::Error&) {
      }
      try {
        (void)f.get_int_array(key);
      } catch (const tritium::Error&) {
      }
    }
    for (const auto& t : f.tensors()) {
      (void)t.ne_str();
      if (t.nbytes > (1u << 20) || !tritium::gguf_type_is_supported(t.type)) continue;
      try {
        (void)tritium::gguf_tensor_to_f32(t, f.path());
        if (tritium::gguf_type_is_ternary(t.type)) (void)tritium::gguf_tensor_to_ternary(t, f.path());
      } catch (const tritium::Error&) {
      }
    }
  } catch (const tritium::Error&) {
  }
  return 0;
}
