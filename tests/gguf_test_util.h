// Test helpers for GGUF: a small writer (for hand-made and deliberately broken files) and the upstream-written
// fixtures of ../shared/models-gguf, unpacked once per machine.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "io/gguf.h"
#include "kv/block_allocator.h"
#include "test_util.h"

namespace tritium::test {

/// Builds GGUF bytes: key/value pairs and tensors in the order added, tensor data laid out as ggml does (each
/// tensor at the previous end rounded up to the alignment).
class GgufWriter {
 public:
  /// Raw value bytes (after the type) of a metadata entry.
  void add_raw(const std::string& key, GgufType type, const std::vector<uint8_t>& value) {
    put_str(kv_, key);
    put<uint32_t>(kv_, static_cast<uint32_t>(type));
    kv_.insert(kv_.end(), value.begin(), value.end());
    ++n_kv_;
  }
  template <typename T>
  void add(const std::string& key, GgufType type, T v) {
    std::vector<uint8_t> b;
    put<T>(b, v);
    add_raw(key, type, b);
  }
  void add_u32(const std::string& key, uint32_t v) { add(key, GgufType::kUint32, v); }
  void add_i32(const std::string& key, int32_t v) { add(key, GgufType::kInt32, v); }
  void add_f32(const std::string& key, float v) { add(key, GgufType::kFloat32, v); }
  void add_bool(const std::string& key, bool v) { add<uint8_t>(key, GgufType::kBool, v ? 1 : 0); }
  void add_string(const std::string& key, const std::string& v) {
    std::vector<uint8_t> b;
    put_str(b, v);
    add_raw(key, GgufType::kString, b);
  }
  void add_strings(const std::string& key, const std::vector<std::string>& v) {
    std::vector<uint8_t> b;
    put<uint32_t>(b, static_cast<uint32_t>(GgufType::kString));
    put<uint64_t>(b, v.size());
    for (const auto& s : v) put_str(b, s);
    add_raw(key, GgufType::kArray, b);
  }
  void add_i32s(const std::string& key, const std::vector<int32_t>& v) {
    std::vector<uint8_t> b;
    put<uint32_t>(b, static_cast<uint32_t>(GgufType::kInt32));
    put<uint64_t>(b, v.size());
    for (int32_t x : v) put<int32_t>(b, x);
    add_raw(key, GgufType::kArray, b);
  }
  /// A tensor with explicit data bytes (their size is not checked here: broken files are the point).
  void add_tensor(const std::string& name, uint32_t type, const std::vector<int64_t>& ne, std::vector<uint8_t> data) {
    tensors_.push_back({name, type, ne, std::move(data)});
  }

  std::vector<uint8_t> bytes(uint32_t version = 3, uint64_t alignment = 32) const {
    std::vector<uint8_t> out = {'G', 'G', 'U', 'F'};
    put<uint32_t>(out, version);
    put<uint64_t>(out, tensors_.size());
    put<uint64_t>(out, n_kv_);
    out.insert(out.end(), kv_.begin(), kv_.end());
    uint64_t off = 0;
    for (const auto& t : tensors_) {
      put_str(out, t.name);
      put<uint32_t>(out, static_cast<uint32_t>(t.ne.size()));
      for (int64_t d : t.ne) put<uint64_t>(out, static_cast<uint64_t>(d));
      put<uint32_t>(out, t.type);
      put<uint64_t>(out, off);
      off = (off + t.data.size() + alignment - 1) / alignment * alignment;
    }
    out.resize((out.size() + alignment - 1) / alignment * alignment, 0);
    for (const auto& t : tensors_) {
      out.insert(out.end(), t.data.begin(), t.data.end());
      if (&t != &tensors_.back()) out.resize((out.size() + alignment - 1) / alignment * alignment, 0);
    }
    return out;
  }

  template <typename T>
  static void put(std::vector<uint8_t>& b, T v) {
    uint8_t raw[sizeof(T)];
    std::memcpy(raw, &v, sizeof(T));
    b.insert(b.end(), raw, raw + sizeof(T));
  }
  static void put_str(std::vector<uint8_t>& b, const std::string& s) {
    put<uint64_t>(b, s.size());
    b.insert(b.end(), s.begin(), s.end());
  }

 private:
  struct Tensor {
    std::string name;
    uint32_t type;
    std::vector<int64_t> ne;
    std::vector<uint8_t> data;
  };
  std::vector<uint8_t> kv_;
  uint64_t n_kv_ = 0;
  std::vector<Tensor> tensors_;
};

inline std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

inline void write_bytes(const std::string& path, const std::vector<uint8_t>& b) {
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

/// A scratch folder for one test, removed by the destructor.
class TempDir {
 public:
  TempDir() {
    path_ = std::filesystem::temp_directory_path() /
            ("tritium_gguf_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

/// The folder holding the unpacked fixtures (tiny-bitnet-{F16,TQ2_0,I2_S}.gguf, tiny-qwen2-Q8_0.gguf), or "" when
/// the shared data is absent. The archive is unpacked once per machine into the temp folder (to a private folder,
/// then renamed, so concurrent test processes never see a half-written file).
inline std::string gguf_fixtures_dir() {
  const std::string shared = shared_dir();
  if (shared.empty()) return "";
  const std::filesystem::path archive = std::filesystem::path(shared) / "models-gguf/gguf-fixtures.tar.xz";
  if (!std::filesystem::exists(archive)) return "";
  const auto dest = std::filesystem::temp_directory_path() /
                    ("tritium-gguf-fixtures-" + std::to_string(std::filesystem::file_size(archive)));
  if (std::filesystem::exists(dest / "gguf/SHA256SUMS")) return (dest / "gguf").string();
  const auto tmp = dest.string() + ".partial." + std::to_string(::getpid());
  std::filesystem::create_directories(tmp);
  const std::string cmd = "tar -xJf '" + archive.string() + "' -C '" + tmp + "'";
  if (std::system(cmd.c_str()) != 0) return "";
  std::error_code ec;
  std::filesystem::rename(tmp, dest, ec);
  if (ec) std::filesystem::remove_all(tmp);  // another process got there first
  return std::filesystem::exists(dest / "gguf/SHA256SUMS") ? (dest / "gguf").string() : "";
}

}  // namespace tritium::test

#define REQUIRE_GGUF_FIXTURES(dir)                                                                       \
  const std::string dir = ::tritium::test::gguf_fixtures_dir();                                           \
  if (dir.empty()) GTEST_SKIP() << "GGUF fixtures not found (TRITIUM_TEST_DATA/models-gguf/gguf-fixtures.tar.xz)"
