// libFuzzer target: the safetensors reader (io/safetensors.h) on arbitrary bytes: the header length, the JSON
// header, every tensor entry (dtype, shape, data_offsets) checked against the file, then every accepted tensor's
// bytes read. The only acceptable failure is a tritium::Error. Seeds: tests/fuzz/safetensors/.
#include <cstddef>
#include <cstdint>

#include "core/error.h"
#include "fuzz_util.h"
#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = tritium::fuzz::scratch_file("model.safetensors", data, size);
  try {
    tritium::SafetensorsFile f(path);
    uint64_t sum = 0;
    for (const auto& [name, t] : f.tensors()) {
      (void)t.shape_str();
      if (t.nbytes > 0) sum += t.data[0] + t.data[t.nbytes - 1];
    }
    (void)f.metadata().dump();
    return static_cast<int>(sum & 0);
  } catch (const tritium::Error&) {
  }
  return 0;
}
