// tritium io: GGUF reading (the file format of llama.cpp, ggml and bitnet.cpp), validated before any use.
//
// Spec followed: ggml's docs/gguf.md, versions 2 and 3 (version 1 had 32-bit counts and is rejected), little-endian
// only (a big-endian file is recognised by its byte-swapped version and rejected). Layout:
//   "GGUF" | u32 version | u64 tensor_count | u64 metadata_kv_count
//   metadata_kv_count x { string key | u32 value_type | value }
//   tensor_count x { string name | u32 n_dims (1..4) | u64 ne[n_dims] | u32 ggml_type | u64 offset }
//   padding to general.alignment (u32, a power of two; 32 when absent) | data section
// A string is a u64 byte length and the bytes (no terminator). An array value is u32 element type, u64 count and the
// elements (arrays may nest). Tensor offsets are relative to the data section and, as ggml writes them and its
// reader requires, tensor i starts exactly where tensor i-1 ends rounded up to the alignment (tensor 0 at 0).
//
// Shapes: ne is in GGUF (ggml) order, ne[0] the contiguous dimension; a Hugging Face [out, in] matrix is
// ne = {in, out}. Byte sizes: ne[0] / block_size * block_bytes * ne[1] * ne[2] * ne[3] from the ggml type table
// (ggml_type_info), except bitnet.cpp's I2_S (type 36): numel / 4 bytes of 2-bit codes and a 32-byte tail holding
// the float32 scale (ggml_nbytes special-cases it; the block size 1 / type size 1 of its type traits would be wrong),
// and Q2_0 (type 42), which two block layouts share: mainline ggml's block_q2_0 (64 weights in 18 bytes: fp16 d,
// 16 bytes of 2-bit codes) and PrismML's earlier one (128 weights in 34 bytes: fp16 d, 32 bytes of codes), which the
// published Ternary Bonsai `*-Q2_0.gguf` files use. The span a Q2_0 tensor occupies (to the next tensor's offset, or
// to the end of the file for the last) tells them apart: a tensor of n weights needs n * 18 / 64 or n * 34 / 128
// bytes, rounded up to the alignment. A span that fits neither is an error (a truncated or lying file); a span that
// fits both (tensors under 64 * alignment weights) takes the layout the file's other Q2_0 tensors show, and is an
// error when none does.
//
// Errors: every count, string length, offset and tensor extent is checked against the file size (overflow-safe)
// before it is used, so a lying file gives a tritium::Error naming the file and the key or tensor, never a read
// past the end or an allocation larger than the file justifies. Unknown value types and unknown ggml types are
// errors naming the key or tensor; known ggml types that tritium cannot decode are accepted here (inspect lists
// them) and rejected by the decoders (formats/gguf_quants.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/mapped_file.h"

namespace tritium {

/// GGUF metadata value types (gguf_type).
enum class GgufType : uint32_t {
  kUint8 = 0, kInt8 = 1, kUint16 = 2, kInt16 = 3, kUint32 = 4, kInt32 = 5, kFloat32 = 6, kBool = 7,
  kString = 8, kArray = 9, kUint64 = 10, kInt64 = 11, kFloat64 = 12,
};
/// "UINT8", ..., "FLOAT64".
std::string_view gguf_type_name(GgufType t);

/// ggml tensor types that tritium decodes (type ids as ggml / bitnet.cpp number them).
enum class GgmlType : uint32_t {
  kF32 = 0, kF16 = 1, kQ8_0 = 8, kBF16 = 30, kTQ1_0 = 34, kTQ2_0 = 35, kI2_S = 36, kQ2_0 = 42
};

/// One entry of the ggml type table.
struct GgmlTypeInfo {
  uint32_t id;
  const char* name;      ///< "F32", "Q8_0", "I2_S", ...
  int64_t block;         ///< weights per block along ne[0]
  int64_t block_bytes;   ///< bytes per block (I2_S: see the header comment)
};
/// The table entry of a ggml type id; nullptr for an id in no table (upstream ggml or bitnet.cpp).
const GgmlTypeInfo* ggml_type_info(uint32_t id);
/// The type's name, or "type <id>" for an unknown id.
std::string ggml_type_name(uint32_t id);

/// One metadata value. Strings and numeric array elements point into the file's bytes (valid as long as the
/// GgufFile that produced the value).
class GgufValue {
 public:
  GgufType type() const { return type_; }
  bool is_integer() const;
  bool is_float() const { return type_ == GgufType::kFloat32 || type_ == GgufType::kFloat64; }

  /// An integer scalar that is >= 0 (bool counts as 0 / 1); nullopt for other types or negative values.
  std::optional<uint64_t> to_uint() const;
  /// An integer scalar within int64; nullopt otherwise.
  std::optional<int64_t> to_int() const;
  /// A FLOAT32 / FLOAT64 scalar, or an integer scalar widened to double; nullopt otherwise.
  std::optional<double> to_float() const;
  std::optional<bool> to_bool() const;
  std::optional<std::string_view> to_string() const;

  /// Arrays: element type and count (0 for scalars).
  GgufType elem_type() const { return elem_; }
  uint64_t size() const { return count_; }
  /// Element i of an array (i < size()); a scalar, a string or a nested array.
  GgufValue at(uint64_t i) const;

  /// A short rendering for messages and `inspect`: scalars in full, strings and arrays abbreviated.
  std::string summary() const;

 private:
  friend class GgufParser;
  GgufType type_ = GgufType::kUint8;
  GgufType elem_ = GgufType::kUint8;
  uint64_t u_ = 0;  ///< unsigned and bool scalars
  int64_t i_ = 0;   ///< signed scalars
  double f_ = 0;    ///< float scalars
  std::string_view str_;
  const uint8_t* raw_ = nullptr;  ///< numeric arrays: the elements in place (little-endian, maybe unaligned)
  uint64_t count_ = 0;
  std::vector<std::string_view> strs_;  ///< string arrays: the elements in place (16 bytes each: a tokenizer's
                                        ///< 151k tokens and merges take 4.8 MB, not a GgufValue each)
  std::vector<GgufValue> items_;        ///< nested arrays
};

/// One tensor of the directory, with its data located and its size checked.
struct GgufTensorInfo {
  std::string name;
  uint32_t type = 0;         ///< ggml type id (ggml_type_info(type) is non-null for every tensor of a GgufFile)
  std::vector<int64_t> ne;   ///< GGUF order, ne[0] innermost; 1 to 4 dimensions
  uint64_t offset = 0;       ///< from the start of the data section
  uint64_t nbytes = 0;
  /// The block layout of the data: weights per block along ne[0] and bytes per block (the type table's, except for
  /// Q2_0, whose layout the file's sizes decide: 64 / 18 or 128 / 34; I2_S: 1 / 1 and the tail, as the table says).
  int64_t block = 1;
  int64_t block_bytes = 0;
  const uint8_t* data = nullptr;

  int64_t numel() const;
  /// "[256, 8192]" in GGUF order.
  std::string ne_str() const;
};

/// A validated GGUF file (memory-mapped, or bytes borrowed from the caller).
class GgufFile {
 public:
  /// Maps and validates `path`. Throws tritium::Error naming the file (and key or tensor) on any violation.
  static GgufFile open(const std::string& path);
  /// Validates `size` bytes at `data`, which must outlive the result; `name` is used in messages.
  static GgufFile parse(const uint8_t* data, size_t size, std::string name);

  const std::string& path() const { return name_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  /// Byte offset of the data section in the file.
  uint64_t data_offset() const { return data_offset_; }
  uint64_t file_size() const { return size_; }
  /// The file's mapping (tensor data pointers lie in it); nullptr for a file made by parse().
  const MappedFile* mapping() const { return file_.data() ? &file_ : nullptr; }

  /// Metadata in file order.
  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return kv_; }
  /// Frees the metadata (a tokenizer's vocabulary and merges are tens of MB as parsed): for a file kept open only
  /// for its tensors' data. The tensor directory and the mapping stay; find() then finds nothing.
  void drop_metadata();
  /// nullptr when absent.
  const GgufValue* find(std::string_view key) const;

  /// Typed getters: absent -> "metadata 'key' is missing"; wrong type -> "metadata 'key' has type T, expected ...".
  std::string get_string(std::string_view key) const;
  uint64_t get_uint(std::string_view key) const;
  double get_float(std::string_view key) const;
  bool get_bool(std::string_view key) const;
  /// The same, nullopt when absent (still an error when present with the wrong type).
  std::optional<std::string> find_string(std::string_view key) const;
  std::optional<uint64_t> find_uint(std::string_view key) const;
  std::optional<double> find_float(std::string_view key) const;
  std::optional<bool> find_bool(std::string_view key) const;
  /// Arrays of one element kind (wrong element types are errors naming the key).
  std::vector<std::string_view> get_string_array(std::string_view key) const;
  std::vector<int64_t> get_int_array(std::string_view key) const;

  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  /// nullptr when absent.
  const GgufTensorInfo* find_tensor(std::string_view name) const;
  /// Throws "tensor 'name' is missing".
  const GgufTensorInfo& tensor(std::string_view name) const;

 private:
  friend class GgufParser;
  GgufFile() = default;
  MappedFile file_;
  std::string name_;
  uint64_t size_ = 0;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, GgufValue>> kv_;
  std::unordered_map<std::string, size_t> kv_index_;
  std::vector<GgufTensorInfo> tensors_;
  std::unordered_map<std::string, size_t> tensor_index_;
};

/// True when `path` is a regular file that starts with the GGUF magic.
bool is_gguf_file(const std::string& path);

}  // namespace tritium
