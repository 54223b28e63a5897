// tritium io: writing GGUF files (ggml's docs/gguf.md, version 3), as llama.cpp's gguf-py writes them: the header,
// the metadata in the order added, the tensor directory, padding to general.alignment (32), and each tensor's data
// at the previous tensor's end rounded up to the alignment, the last one padded too. io/gguf.h reads the result.
//
// Tensor data is produced when the file is written, one tensor at a time (a producer callback fills a buffer of the
// declared size), so a multi-GiB model is never held in memory whole.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "io/gguf.h"

namespace tritium {

class GgufFileWriter {
 public:
  void add_u32(const std::string& key, uint32_t v);
  void add_i32(const std::string& key, int32_t v);
  void add_f32(const std::string& key, float v);
  void add_bool(const std::string& key, bool v);
  void add_string(const std::string& key, const std::string& v);
  void add_strings(const std::string& key, const std::vector<std::string>& v);
  void add_i32s(const std::string& key, const std::vector<int32_t>& v);

  /// A tensor of ggml type `type` and shape `ne` (GGUF order, ne[0] innermost) whose data is `nbytes` bytes,
  /// written by `fill` into the buffer it is given (exactly nbytes long) when write() reaches it.
  void add_tensor(const std::string& name, uint32_t type, const std::vector<int64_t>& ne, uint64_t nbytes,
                  std::function<void(uint8_t* dst)> fill);

  /// Writes the file. Throws tritium::Error naming `path` on an I/O failure (a partial file is removed).
  void write(const std::string& path) const;

 private:
  struct Tensor {
    std::string name;
    uint32_t type;
    std::vector<int64_t> ne;
    uint64_t nbytes;
    std::function<void(uint8_t*)> fill;
  };
  void add_raw(const std::string& key, GgufType type, const std::vector<uint8_t>& value);
  std::vector<uint8_t> kv_;
  uint64_t n_kv_ = 0;
  std::vector<Tensor> tensors_;
};

}  // namespace tritium
