#include "io/gguf_writer.h"

#include <cstdio>
#include <cstring>
#include <filesystem>

#include "core/error.h"

namespace tritium {
namespace {

constexpr uint64_t kAlignment = 32;

template <typename T>
void put(std::vector<uint8_t>& b, T v) {
  uint8_t raw[sizeof(T)];
  std::memcpy(raw, &v, sizeof(T));
  b.insert(b.end(), raw, raw + sizeof(T));
}

void put_str(std::vector<uint8_t>& b, const std::string& s) {
  put<uint64_t>(b, s.size());
  b.insert(b.end(), s.begin(), s.end());
}

uint64_t align_up(uint64_t n) { return (n + kAlignment - 1) / kAlignment * kAlignment; }

}  // namespace

void GgufFileWriter::add_raw(const std::string& key, GgufType type, const std::vector<uint8_t>& value) {
  put_str(kv_, key);
  put<uint32_t>(kv_, static_cast<uint32_t>(type));
  kv_.insert(kv_.end(), value.begin(), value.end());
  ++n_kv_;
}

void GgufFileWriter::add_u32(const std::string& key, uint32_t v) {
  std::vector<uint8_t> b;
  put(b, v);
  add_raw(key, GgufType::kUint32, b);
}

void GgufFileWriter::add_i32(const std::string& key, int32_t v) {
  std::vector<uint8_t> b;
  put(b, v);
  add_raw(key, GgufType::kInt32, b);
}

void GgufFileWriter::add_f32(const std::string& key, float v) {
  std::vector<uint8_t> b;
  put(b, v);
  add_raw(key, GgufType::kFloat32, b);
}

void GgufFileWriter::add_bool(const std::string& key, bool v) { add_raw(key, GgufType::kBool, {static_cast<uint8_t>(v ? 1 : 0)}); }

void GgufFileWriter::add_string(const std::string& key, const std::string& v) {
  std::vector<uint8_t> b;
  put_str(b, v);
  add_raw(key, GgufType::kString, b);
}

void GgufFileWriter::add_strings(const std::string& key, const std::vector<std::string>& v) {
  std::vector<uint8_t> b;
  put<uint32_t>(b, static_cast<uint32_t>(GgufType::kString));
  put<uint64_t>(b, v.size());
  for (const auto& s : v) put_str(b, s);
  add_raw(key, GgufType::kArray, b);
}

void GgufFileWriter::add_i32s(const std::string& key, const std::vector<int32_t>& v) {
  std::vector<uint8_t> b;
  put<uint32_t>(b, static_cast<uint32_t>(GgufType::kInt32));
  put<uint64_t>(b, v.size());
  for (int32_t x : v) put<int32_t>(b, x);
  add_raw(key, GgufType::kArray, b);
}

void GgufFileWriter::add_tensor(const std::string& name, uint32_t type, const std::vector<int64_t>& ne, uint64_t nbytes,
                                std::function<void(uint8_t*)> fill) {
  TRITIUM_CHECK(!ne.empty() && ne.size() <= 4, "GGUF tensor '{}': {} dimensions", name, ne.size());
  tensors_.push_back({name, type, ne, nbytes, std::move(fill)});
}

void GgufFileWriter::write(const std::string& path) const {
  std::vector<uint8_t> head = {'G', 'G', 'U', 'F'};
  put<uint32_t>(head, 3);
  put<uint64_t>(head, tensors_.size());
  put<uint64_t>(head, n_kv_);
  head.insert(head.end(), kv_.begin(), kv_.end());
  uint64_t off = 0;
  for (const auto& t : tensors_) {
    put_str(head, t.name);
    put<uint32_t>(head, static_cast<uint32_t>(t.ne.size()));
    for (int64_t d : t.ne) put<uint64_t>(head, static_cast<uint64_t>(d));
    put<uint32_t>(head, t.type);
    put<uint64_t>(head, off);
    off = align_up(off + t.nbytes);
  }
  head.resize(align_up(head.size()), 0);

  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) fail("{}: cannot open for writing", path);
  bool ok = std::fwrite(head.data(), 1, head.size(), f) == head.size();
  std::vector<uint8_t> buf;
  for (size_t i = 0; ok && i < tensors_.size(); ++i) {
    const Tensor& t = tensors_[i];
    buf.assign(align_up(t.nbytes), 0);
    t.fill(buf.data());
    ok = std::fwrite(buf.data(), 1, buf.size(), f) == buf.size();
  }
  ok = std::fclose(f) == 0 && ok;
  if (!ok) {
    std::error_code ec;
    std::filesystem::remove(path, ec);
    fail("{}: write failed (disk full?)", path);
  }
}

}  // namespace tritium
