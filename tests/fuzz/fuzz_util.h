// Helpers shared by the libFuzzer targets: a per-process scratch file for parsers that read files.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

namespace tritium::fuzz {

/// Writes bytes to this process's scratch file (in TMPDIR or /tmp, named after the target and the pid) and
/// returns its path. The file is rewritten on every call.
inline std::string scratch_file(const char* name, const uint8_t* data, size_t size) {
  const char* dir = std::getenv("TMPDIR");
  const std::string path = std::string(dir && *dir ? dir : "/tmp") + "/tritium-fuzz-" + std::to_string(getpid()) + "-" + name;
  if (FILE* f = std::fopen(path.c_str(), "wb")) {
    if (size > 0) std::fwrite(data, 1, size, f);
    std::fclose(f);
  }
  return path;
}

/// The bundled model folder (models/tiny-bitnet of the source tree the target was built from).
inline std::string bundled_model() { return std::string(TRITIUM_SOURCE_DIR) + "/models/tiny-bitnet"; }

}  // namespace tritium::fuzz
