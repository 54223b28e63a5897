#include "io/safetensors.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/error.h"

namespace fs = std::filesystem;

namespace tritium {

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string TensorView::shape_str() const {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

namespace {
constexpr uint64_t kMaxHeader = 256ull << 20;  // a header larger than this is certainly corrupt

uint64_t read_u64_le(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
}  // namespace

SafetensorsFile::SafetensorsFile(const std::string& path) : file_(path) {
  const size_t size = file_.size();
  if (size < 8) fail("{}: truncated safetensors file ({} bytes, need at least 8 for the header length)", path, size);
  const uint64_t n = read_u64_le(file_.data());
  if (n > kMaxHeader || n > size - 8)
    fail("{}: safetensors header length {} exceeds the file size {} (truncated or not a safetensors file)", path,
         n, size);
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(file_.data() + 8, file_.data() + 8 + n);
  } catch (const nlohmann::json::exception& e) {
    fail("{}: safetensors header is not valid JSON: {}", path, e.what());
  }
  if (!header.is_object()) fail("{}: safetensors header is not a JSON object", path);
  const uint8_t* base = file_.data() + 8 + n;
  const uint64_t data_size = size - 8 - n;

  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    if (name == "__metadata__") {
      metadata_ = it.value();
      continue;
    }
    const auto& e = it.value();
    if (!e.is_object() || !e.contains("dtype") || !e.contains("shape") || !e.contains("data_offsets"))
      fail("{}: tensor '{}': entry needs dtype, shape and data_offsets", path, name);
    TensorView t;
    t.name = name;
    t.file = path;
    t.mapping = &file_;
    if (!e["dtype"].is_string() || !parse_dtype(e["dtype"].get<std::string>(), &t.dtype))
      fail("{}: tensor '{}': unsupported dtype {}", path, name, e["dtype"].dump());
    if (!e["shape"].is_array()) fail("{}: tensor '{}': shape is not an array", path, name);
    uint64_t numel = 1;
    for (const auto& d : e["shape"]) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0)
        fail("{}: tensor '{}': invalid dimension {}", path, name, d.dump());
      const uint64_t dim = d.get<uint64_t>();
      if (dim != 0 && numel > (uint64_t{1} << 48) / dim) fail("{}: tensor '{}': shape too large", path, name);
      numel *= dim;
      t.shape.push_back(static_cast<int64_t>(dim));
    }
    const auto& off = e["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      fail("{}: tensor '{}': data_offsets must be two non-negative integers", path, name);
    const uint64_t b = off[0].get<uint64_t>(), en = off[1].get<uint64_t>();
    if (b > en || en > data_size)
      fail("{}: tensor '{}': data_offsets [{}, {}] outside the data section of {} bytes (truncated file?)", path,
           name, b, en, data_size);
    const uint64_t expect = numel * dtype_size(t.dtype);
    if (en - b != expect)
      fail("{}: tensor '{}': byte size {} does not match shape {} x {} ({} bytes)", path, name, en - b,
           t.shape_str(), dtype_name(t.dtype), expect);
    t.data = base + b;
    t.nbytes = en - b;
    if (en > b) ranges.emplace_back(b, en);
    tensors_.emplace(name, std::move(t));
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i) {
    if (ranges[i].first < ranges[i - 1].second)
      fail("{}: tensors overlap in the data section (offsets {} and {})", path, ranges[i - 1].first,
           ranges[i].first);
  }
}

const TensorView* SafetensorsFile::find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

WeightStore::WeightStore(const std::string& model_dir) : dir_(model_dir) {
  if (!fs::is_directory(model_dir)) fail("{}: model folder not found", model_dir);
  const fs::path single = fs::path(model_dir) / "model.safetensors";
  const fs::path index = fs::path(model_dir) / "model.safetensors.index.json";
  std::vector<std::string> shard_files;
  if (fs::exists(index)) {
    nlohmann::json j;
    try {
      std::ifstream in(index);
      j = nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception& e) {
      fail("{}: invalid JSON: {}", index.string(), e.what());
    }
    if (!j.contains("weight_map") || !j["weight_map"].is_object())
      fail("{}: missing weight_map", index.string());
    for (auto& [name, file] : j["weight_map"].items()) {
      if (!file.is_string()) fail("{}: weight_map['{}'] is not a file name", index.string(), name);
      const std::string f = file.get<std::string>();
      if (f.find('/') != std::string::npos || f.find("..") != std::string::npos)
        fail("{}: weight_map['{}'] names a file outside the folder: {}", index.string(), name, f);
      if (std::find(shard_files.begin(), shard_files.end(), f) == shard_files.end()) shard_files.push_back(f);
    }
  } else if (fs::exists(single)) {
    shard_files.push_back("model.safetensors");
  } else {
    // A tritium converted model or any single *.safetensors file.
    for (const auto& e : fs::directory_iterator(model_dir)) {
      if (e.path().extension() == ".safetensors") shard_files.push_back(e.path().filename().string());
    }
    std::sort(shard_files.begin(), shard_files.end());
    if (shard_files.empty()) fail("{}: no model.safetensors or model.safetensors.index.json", model_dir);
  }
  for (const auto& f : shard_files) {
    files_.push_back(std::make_unique<SafetensorsFile>((fs::path(model_dir) / f).string()));
    for (const auto& [name, t] : files_.back()->tensors()) {
      if (!index_.emplace(name, &t).second) fail("{}: tensor '{}' appears in more than one shard", model_dir, name);
    }
  }
}

std::unique_ptr<WeightStore> WeightStore::from_file(const std::string& path) {
  std::unique_ptr<WeightStore> ws(new WeightStore());
  ws->dir_ = path;
  ws->files_.push_back(std::make_unique<SafetensorsFile>(path));
  for (const auto& [name, t] : ws->files_.back()->tensors()) ws->index_.emplace(name, &t);
  return ws;
}

const TensorView* WeightStore::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : it->second;
}

const TensorView& WeightStore::get(const std::string& name) const {
  const TensorView* t = find(name);
  if (!t) fail("{}: weight '{}' is missing", dir_, name);
  return *t;
}

const TensorView& WeightStore::get(const std::string& name, const std::vector<int64_t>& shape) const {
  const TensorView& t = get(name);
  if (t.shape != shape) {
    TensorView want;
    want.shape = shape;
    fail("{}: weight '{}' has shape {}, expected {}", t.file, name, t.shape_str(), want.shape_str());
  }
  return t;
}

std::vector<std::string> WeightStore::names() const {
  std::vector<std::string> out;
  for (const auto& [n, _] : index_) out.push_back(n);
  return out;
}

const nlohmann::json& WeightStore::metadata() const {
  static const nlohmann::json kEmpty = nlohmann::json::object();
  return files_.empty() ? kEmpty : files_.front()->metadata();
}

float tensor_scalar_f32(const TensorView& t, int64_t i) {
  TRITIUM_CHECK(i >= 0 && i < t.numel(), "{}: tensor '{}': index {} out of range", t.file, t.name, i);
  const uint8_t* p = t.data + i * dtype_size(t.dtype);
  uint16_t h;
  switch (t.dtype) {
    case DType::F32: { float f; std::memcpy(&f, p, 4); return f; }
    case DType::F64: { double d; std::memcpy(&d, p, 8); return static_cast<float>(d); }
    case DType::BF16: std::memcpy(&h, p, 2); return bf16_to_f32(h);
    case DType::F16: std::memcpy(&h, p, 2); return f16_to_f32(h);
    default: break;
  }
  fail("{}: tensor '{}' has dtype {}, expected a floating type (F32, F16, BF16)", t.file, t.name,
       dtype_name(t.dtype));
}

std::vector<float> tensor_to_f32(const TensorView& t) {
  const int64_t n = t.numel();
  std::vector<float> out(static_cast<size_t>(n));
  switch (t.dtype) {
    case DType::F32:
      if (n > 0) std::memcpy(out.data(), t.data, n * 4);  // an empty tensor has no data
      return out;
    case DType::BF16:
      for (int64_t i = 0; i < n; ++i) { uint16_t h; std::memcpy(&h, t.data + 2 * i, 2); out[i] = bf16_to_f32(h); }
      return out;
    case DType::F16:
      for (int64_t i = 0; i < n; ++i) { uint16_t h; std::memcpy(&h, t.data + 2 * i, 2); out[i] = f16_to_f32(h); }
      return out;
    default:
      for (int64_t i = 0; i < n; ++i) out[i] = tensor_scalar_f32(t, i);
      return out;
  }
}

void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  // The header is padded with spaces so the data section starts 8-byte aligned, as the reference writer does.
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t off = 0;
  std::vector<uint64_t> offsets;
  // Tensors are laid out back to back: Python's safetensors rejects gaps between them.
  for (const auto& t : tensors) {
    offsets.push_back(off);
    header[t.name] = {{"dtype", std::string(dtype_name(t.dtype))}, {"shape", t.shape},
                      {"data_offsets", {off, off + t.nbytes}}};
    off += t.nbytes;
  }
  std::string hs = header.dump();
  while ((hs.size() + 8) % 8 != 0) hs.push_back(' ');
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) fail("{}: cannot open for writing", tmp);
    uint64_t n = hs.size();
    uint8_t len[8];
    for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(n >> (8 * i));
    out.write(reinterpret_cast<const char*>(len), 8);
    out.write(hs.data(), static_cast<std::streamsize>(hs.size()));
    uint64_t pos = 0;
    static const char zeros[8] = {};
    for (size_t i = 0; i < tensors.size(); ++i) {
      out.write(zeros, static_cast<std::streamsize>(offsets[i] - pos));
      out.write(static_cast<const char*>(tensors[i].data), static_cast<std::streamsize>(tensors[i].nbytes));
      pos = offsets[i] + tensors[i].nbytes;
    }
    if (!out) fail("{}: write failed (disk full?)", tmp);
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) fail("{}: cannot rename to {}: {}", tmp, path, ec.message());
}

}  // namespace tritium
