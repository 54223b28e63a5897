// libFuzzer target: the tritium model container (model/tritium_model.h) on arbitrary bytes: the safetensors
// header, the "tritium.layout" metadata (every linear's kind, format, shapes and buffers), each buffer checked
// against its format and the config, through load_transformer as `tritium -m DIR` does. The config is fixed
// (tests/fuzz/tritium_model.config.json, synth --shape micro). The only acceptable failure is a tritium::Error.
// Seeds: tests/fuzz/tritium_model/ (micro models converted with --weights i2, tq1, bitcos and a q4 head).
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "model/loader.h"

namespace {
std::string model_dir() {
  static const std::string dir = [] {
    const char* tmp = std::getenv("TMPDIR");
    const std::string d = std::string(tmp && *tmp ? tmp : "/tmp") + "/tritium-fuzz-" + std::to_string(getpid()) + "-model";
    std::filesystem::create_directories(d);
    std::filesystem::copy_file(std::string(TRITIUM_SOURCE_DIR) + "/tests/fuzz/tritium_model.config.json",
                               d + "/config.json", std::filesystem::copy_options::overwrite_existing);
    return d;
  }();
  return dir;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string dir = model_dir();
  {
    std::ofstream f(dir + "/model.safetensors", std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  try {
    auto m = tritium::load_transformer(dir);
    return m->config().num_layers > 0 ? 0 : 0;
  } catch (const tritium::Error&) {
  }
  return 0;
}
