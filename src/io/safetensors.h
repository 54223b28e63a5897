// tritium io: safetensors reading (https://github.com/huggingface/safetensors format).
//
// File layout: u64 little-endian header length N, N bytes of JSON
// {"name": {"dtype": "BF16", "shape": [..], "data_offsets": [begin, end]}, ..., "__metadata__": {...}},
// then the data section; offsets are relative to the start of the data section.
// Files are memory-mapped; tensor data is used in place.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/mapped_file.h"

namespace tritium {

/// One tensor inside a mapped safetensors file. `data` points into the mapping.
struct TensorView {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;
  size_t nbytes = 0;
  std::string file;  ///< path of the file holding it (for error messages)
  const MappedFile* mapping = nullptr;  ///< the mapping `data` points into (lives as long as its SafetensorsFile)

  int64_t numel() const;
  /// "[8192, 256]"
  std::string shape_str() const;
};

/// A validated, memory-mapped safetensors file.
class SafetensorsFile {
 public:
  /// Opens, maps and validates: header length inside the file, JSON well formed, every entry has a known
  /// dtype, a shape of non-negative dims, data_offsets with begin <= end inside the data section,
  /// end - begin == numel * dtype size, and no two tensors overlapping.
  /// Throws tritium::Error naming the file (and tensor) on any violation.
  explicit SafetensorsFile(const std::string& path);

  const std::map<std::string, TensorView>& tensors() const { return tensors_; }
  /// nullptr when absent.
  const TensorView* find(const std::string& name) const;
  const nlohmann::json& metadata() const { return metadata_; }
  const std::string& path() const { return file_.path(); }

 private:
  MappedFile file_;
  std::map<std::string, TensorView> tensors_;
  nlohmann::json metadata_;
};

/// All weights of a model folder: model.safetensors, or the shards listed in model.safetensors.index.json.
class WeightStore {
 public:
  /// Opens the folder's safetensors file(s). Throws tritium::Error when none is present or one is invalid.
  explicit WeightStore(const std::string& model_dir);
  /// Opens exactly one file.
  static std::unique_ptr<WeightStore> from_file(const std::string& path);

  /// nullptr when absent.
  const TensorView* find(const std::string& name) const;
  /// Throws tritium::Error "<dir>: weight 'name' is missing" when absent.
  const TensorView& get(const std::string& name) const;
  /// Like get(), and also checks the shape (error names expected and actual shapes).
  const TensorView& get(const std::string& name, const std::vector<int64_t>& shape) const;
  std::vector<std::string> names() const;
  const std::vector<std::unique_ptr<SafetensorsFile>>& files() const { return files_; }
  /// Metadata of the first file.
  const nlohmann::json& metadata() const;

 private:
  WeightStore() = default;
  std::string dir_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, const TensorView*> index_;
};

/// Converts a floating tensor (F32, F16, BF16, F64) to float32. Throws tritium::Error for other dtypes.
std::vector<float> tensor_to_f32(const TensorView& t);
/// Reads element i of a floating tensor as float.
float tensor_scalar_f32(const TensorView& t, int64_t i = 0);

/// Writes tensors to a safetensors file, back to back in the given order (the data section starts 8-byte
/// aligned; order tensors by decreasing element size to keep each aligned). Written to PATH.tmp, then renamed.
/// Throws tritium::Error on I/O failure.
struct TensorToWrite {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  const void* data;
  size_t nbytes;
};
void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata);

}  // namespace tritium
