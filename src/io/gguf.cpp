#include "io/gguf.h"

#include <bit>
#include <cstring>
#include <fstream>

#include "core/error.h"

namespace tritium {

static_assert(std::endian::native == std::endian::little, "the GGUF reader assumes a little-endian host");

std::string_view gguf_type_name(GgufType t) {
  switch (t) {
    case GgufType::kUint8: return "UINT8";
    case GgufType::kInt8: return "INT8";
    case GgufType::kUint16: return "UINT16";
    case GgufType::kInt16: return "INT16";
    case GgufType::kUint32: return "UINT32";
    case GgufType::kInt32: return "INT32";
    case GgufType::kFloat32: return "FLOAT32";
    case GgufType::kBool: return "BOOL";
    case GgufType::kString: return "STRING";
    case GgufType::kArray: return "ARRAY";
    case GgufType::kUint64: return "UINT64";
    case GgufType::kInt64: return "INT64";
    case GgufType::kFloat64: return "FLOAT64";
  }
  return "?";
}

namespace {

// ggml's type table (ggml.c type_traits: blck_size, type_size) for every type id files can hold, plus bitnet.cpp's
// I2_S. Ids 4, 5 and 31-33, 36-38 of upstream ggml were removed there and never appear in files; 36 is I2_S in
// bitnet.cpp and ik_llama.cpp.
constexpr GgmlTypeInfo kTypes[] = {
    {0, "F32", 1, 4},          {1, "F16", 1, 2},          {2, "Q4_0", 32, 18},       {3, "Q4_1", 32, 20},
    {6, "Q5_0", 32, 22},       {7, "Q5_1", 32, 24},       {8, "Q8_0", 32, 34},       {9, "Q8_1", 32, 36},
    {10, "Q2_K", 256, 84},     {11, "Q3_K", 256, 110},    {12, "Q4_K", 256, 144},    {13, "Q5_K", 256, 176},
    {14, "Q6_K", 256, 210},    {15, "Q8_K", 256, 292},    {16, "IQ2_XXS", 256, 66},  {17, "IQ2_XS", 256, 74},
    {18, "IQ3_XXS", 256, 98},  {19, "IQ1_S", 256, 50},    {20, "IQ4_NL", 32, 18},    {21, "IQ3_S", 256, 110},
    {22, "IQ2_S", 256, 82},    {23, "IQ4_XS", 256, 136},  {24, "I8", 1, 1},          {25, "I16", 1, 2},
    {26, "I32", 1, 4},         {27, "I64", 1, 8},         {28, "F64", 1, 8},         {29, "IQ1_M", 256, 56},
    {30, "BF16", 1, 2},        {34, "TQ1_0", 256, 54},    {35, "TQ2_0", 256, 66},    {36, "I2_S", 1, 1},
    {39, "MXFP4", 32, 17},     {42, "Q2_0", 64, 18},
};

constexpr uint32_t kMaxDims = 4;       // GGML_MAX_DIMS
constexpr int kMaxNesting = 16;        // arrays of arrays deeper than this are refused (no format needs them)
constexpr uint64_t kI2sTailBytes = 32;  // float32 scale + 28 bytes of padding after the codes
// Q2_0's layouts: mainline ggml's block_q2_0 and PrismML's group-128 block.
constexpr int64_t kQ2Block64 = 64, kQ2Bytes64 = 18, kQ2Block128 = 128, kQ2Bytes128 = 34;

bool add_overflows(uint64_t a, uint64_t b, uint64_t* out) { return __builtin_add_overflow(a, b, out); }
bool mul_overflows(uint64_t a, uint64_t b, uint64_t* out) { return __builtin_mul_overflow(a, b, out); }

// Smallest encoded size of one value of type t (0 for an unknown type): bounds the element count of an array by
// the bytes left in the file before anything is allocated for it.
uint64_t min_value_bytes(uint32_t t) {
  switch (static_cast<GgufType>(t)) {
    case GgufType::kUint8: case GgufType::kInt8: case GgufType::kBool: return 1;
    case GgufType::kUint16: case GgufType::kInt16: return 2;
    case GgufType::kUint32: case GgufType::kInt32: case GgufType::kFloat32: return 4;
    case GgufType::kUint64: case GgufType::kInt64: case GgufType::kFloat64: case GgufType::kString: return 8;
    case GgufType::kArray: return 12;
  }
  return 0;
}

}  // namespace

const GgmlTypeInfo* ggml_type_info(uint32_t id) {
  for (const auto& t : kTypes)
    if (t.id == id) return &t;
  return nullptr;
}

std::string ggml_type_name(uint32_t id) {
  const GgmlTypeInfo* t = ggml_type_info(id);
  if (t) return t->name;
  if (id == 37 || id == 38) return fmt::format("{} (bitnet.cpp {})", id, id == 37 ? "TL1" : "TL2");
  return fmt::format("type {}", id);
}

// ---- GgufValue -------------------------------------------------------------------------------------------------

static bool is_integer_type(GgufType t) {
  switch (t) {
    case GgufType::kUint8: case GgufType::kInt8: case GgufType::kUint16: case GgufType::kInt16:
    case GgufType::kUint32: case GgufType::kInt32: case GgufType::kUint64: case GgufType::kInt64: return true;
    default: return false;
  }
}

bool GgufValue::is_integer() const { return is_integer_type(type_); }

static bool is_signed(GgufType t) {
  return t == GgufType::kInt8 || t == GgufType::kInt16 || t == GgufType::kInt32 || t == GgufType::kInt64;
}

std::optional<uint64_t> GgufValue::to_uint() const {
  if (type_ == GgufType::kBool) return u_;
  if (!is_integer()) return std::nullopt;
  if (is_signed(type_)) return i_ < 0 ? std::nullopt : std::optional<uint64_t>(static_cast<uint64_t>(i_));
  return u_;
}

std::optional<int64_t> GgufValue::to_int() const {
  if (!is_integer()) return std::nullopt;
  if (is_signed(type_)) return i_;
  if (u_ > static_cast<uint64_t>(INT64_MAX)) return std::nullopt;
  return static_cast<int64_t>(u_);
}

std::optional<double> GgufValue::to_float() const {
  if (is_float()) return f_;
  if (!is_integer()) return std::nullopt;
  return is_signed(type_) ? static_cast<double>(i_) : static_cast<double>(u_);
}

std::optional<bool> GgufValue::to_bool() const {
  if (type_ != GgufType::kBool) return std::nullopt;
  return u_ != 0;
}

std::optional<std::string_view> GgufValue::to_string() const {
  if (type_ != GgufType::kString) return std::nullopt;
  return str_;
}

namespace {

// A T read at p (little-endian, maybe unaligned).
template <typename T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

}  // namespace

class GgufParser {
 public:
  GgufParser(GgufFile& f, const uint8_t* data, size_t size) : f_(f), base_(data), size_(size) {}

  void run();

  static void set_scalar(GgufValue& v, GgufType t, const uint8_t* p) {
    v.type_ = t;
    switch (t) {
      case GgufType::kUint8: v.u_ = load<uint8_t>(p); break;
      case GgufType::kInt8: v.i_ = load<int8_t>(p); break;
      case GgufType::kUint16: v.u_ = load<uint16_t>(p); break;
      case GgufType::kInt16: v.i_ = load<int16_t>(p); break;
      case GgufType::kUint32: v.u_ = load<uint32_t>(p); break;
      case GgufType::kInt32: v.i_ = load<int32_t>(p); break;
      case GgufType::kFloat32: v.f_ = load<float>(p); break;
      case GgufType::kBool: v.u_ = load<uint8_t>(p) != 0; break;
      case GgufType::kUint64: v.u_ = load<uint64_t>(p); break;
      case GgufType::kInt64: v.i_ = load<int64_t>(p); break;
      case GgufType::kFloat64: v.f_ = load<double>(p); break;
      default: break;
    }
  }

 private:
  // The next n bytes, or an error saying what was being read and where the file ends.
  const uint8_t* take(uint64_t n, const std::string& what) {
    if (n > size_ - pos_)
      fail("{}: truncated: {} needs {} bytes at offset {}, the file has {}", f_.name_, what, n, pos_, size_);
    const uint8_t* p = base_ + pos_;
    pos_ += n;
    return p;
  }
  uint32_t u32(const std::string& what) { return load<uint32_t>(take(4, what)); }
  uint64_t u64(const std::string& what) { return load<uint64_t>(take(8, what)); }
  std::string_view str(const std::string& what) {
    const uint64_t n = u64(what + " (length)");
    if (n > size_ - pos_)
      fail("{}: {} has length {}, past the end of the file ({} bytes left at offset {})", f_.name_, what, n,
           size_ - pos_, pos_);
    return {reinterpret_cast<const char*>(take(n, what)), static_cast<size_t>(n)};
  }
  GgufValue value(uint32_t type, const std::string& key, int depth);
  void resolve_q2_0_layouts(uint64_t data_size);

  GgufFile& f_;
  const uint8_t* base_;
  uint64_t size_;
  uint64_t pos_ = 0;
};

GgufValue GgufParser::value(uint32_t type, const std::string& key, int depth) {
  const uint64_t min = min_value_bytes(type);
  if (min == 0) fail("{}: metadata '{}': unknown value type {}", f_.name_, key, type);
  const std::string what = fmt::format("metadata '{}'", key);
  GgufValue v;
  const auto t = static_cast<GgufType>(type);
  if (t == GgufType::kString) {
    v.type_ = t;
    v.str_ = str(what);
    return v;
  }
  if (t != GgufType::kArray) {
    set_scalar(v, t, take(min, what));
    return v;
  }
  if (depth >= kMaxNesting) fail("{}: metadata '{}': arrays nested deeper than {}", f_.name_, key, kMaxNesting);
  v.type_ = t;
  const uint32_t et = u32(what + " (array element type)");
  const uint64_t emin = min_value_bytes(et);
  if (emin == 0) fail("{}: metadata '{}': unknown array element type {}", f_.name_, key, et);
  v.elem_ = static_cast<GgufType>(et);
  v.count_ = u64(what + " (array length)");
  // Each element takes at least emin bytes: a count the rest of the file cannot hold is a lie, caught before any
  // allocation.
  if (v.count_ > (size_ - pos_) / emin)
    fail("{}: metadata '{}': array of {} {} elements cannot fit in the {} bytes left in the file", f_.name_, key,
         v.count_, gguf_type_name(v.elem_), size_ - pos_);
  if (v.elem_ == GgufType::kString) {
    const std::string elem = what + " (an element)";
    v.strs_.reserve(static_cast<size_t>(v.count_));
    for (uint64_t i = 0; i < v.count_; ++i) v.strs_.push_back(str(elem));
  } else if (v.elem_ == GgufType::kArray) {
    v.items_.reserve(static_cast<size_t>(v.count_));
    for (uint64_t i = 0; i < v.count_; ++i) v.items_.push_back(value(et, fmt::format("{}[{}]", key, i), depth + 1));
  } else {
    v.raw_ = take(v.count_ * emin, what);
  }
  return v;
}

// Decides each Q2_0 tensor's block layout from the bytes it spans (gguf.h says how).
void GgufParser::resolve_q2_0_layouts(uint64_t data_size) {
  const std::string& name = f_.name_;
  const uint64_t al = f_.alignment_;
  auto align_up = [&](uint64_t n) { return (n + al - 1) / al * al; };
  std::vector<size_t> ambiguous;
  int64_t seen[2] = {0, 0};  // tensors decided as 64- and as 128-weight blocks
  auto& ts = f_.tensors_;
  for (size_t i = 0; i < ts.size(); ++i) {
    GgufTensorInfo& t = ts[i];
    if (t.type != static_cast<uint32_t>(GgmlType::kQ2_0)) continue;
    const auto n = static_cast<uint64_t>(t.numel());
    const uint64_t bytes64 = n / kQ2Block64 * kQ2Bytes64;
    const bool can128 = t.ne[0] % kQ2Block128 == 0;
    const uint64_t bytes128 = can128 ? n / kQ2Block128 * kQ2Bytes128 : 0;
    const bool last = i + 1 == ts.size();
    const uint64_t end = last ? data_size : ts[i + 1].offset;
    if (end < t.offset)
      fail("{}: tensor '{}' has offset {}, after the offset {} of the tensor that follows it", name, t.name, t.offset,
           end);
    const uint64_t span = end - t.offset;
    // A tensor is followed by padding to the alignment; the last one may end the file without it.
    auto fits = [&](uint64_t nb) { return last ? nb <= span && span <= align_up(nb) : span == align_up(nb); };
    const bool f64 = fits(bytes64), f128 = can128 && fits(bytes128);
    if (!f64 && !f128)
      fail("{}: tensor '{}' (Q2_0, {}) spans {} bytes, which fits neither Q2_0 layout (64-weight blocks of 18 bytes: "
           "{} bytes; 128-weight blocks of 34 bytes: {}): a truncated file or wrong offsets",
           name, t.name, t.ne_str(), span, bytes64, can128 ? fmt::format("{} bytes", bytes128) : "ne[0] too short");
    if (f64 && f128) {
      ambiguous.push_back(i);
      continue;
    }
    t.block = f64 ? kQ2Block64 : kQ2Block128;
    t.block_bytes = f64 ? kQ2Bytes64 : kQ2Bytes128;
    t.nbytes = f64 ? bytes64 : bytes128;
    ++seen[f64 ? 0 : 1];
  }
  for (size_t i : ambiguous) {
    GgufTensorInfo& t = ts[i];
    if ((seen[0] > 0) == (seen[1] > 0))
      fail("{}: tensor '{}' (Q2_0, {}) fits both Q2_0 layouts (64-weight blocks of 18 bytes and 128-weight blocks of "
           "34 bytes) and the file's other Q2_0 tensors {}",
           name, t.name, t.ne_str(), seen[0] ? "use both" : "do not tell them apart");
    const bool b64 = seen[0] > 0;
    t.block = b64 ? kQ2Block64 : kQ2Block128;
    t.block_bytes = b64 ? kQ2Bytes64 : kQ2Bytes128;
    t.nbytes = static_cast<uint64_t>(t.numel()) / static_cast<uint64_t>(t.block) * static_cast<uint64_t>(t.block_bytes);
  }
}

void GgufParser::run() {
  const std::string& name = f_.name_;
  const uint8_t* magic = take(4, "the magic");
  if (std::memcmp(magic, "GGUF", 4) != 0) {
    std::string m;
    for (int i = 0; i < 4; ++i) m += (magic[i] >= 32 && magic[i] < 127) ? static_cast<char>(magic[i]) : '?';
    fail("{}: not a GGUF file (magic '{}', expected 'GGUF')", name, m);
  }
  f_.version_ = u32("the version");
  if (f_.version_ == 1) fail("{}: GGUF version 1 is not supported (versions 2 and 3 are)", name);
  if (f_.version_ != 2 && f_.version_ != 3) {
    const uint32_t swapped = __builtin_bswap32(f_.version_);
    if (swapped == 2 || swapped == 3)
      fail("{}: a big-endian GGUF file (version {} byte-swapped); tritium reads little-endian GGUF only", name,
           swapped);
    fail("{}: unsupported GGUF version {} (versions 2 and 3 are)", name, f_.version_);
  }
  const uint64_t n_tensors = u64("the tensor count");
  const uint64_t n_kv = u64("the metadata count");
  // A key/value pair takes at least 8 (key length) + 4 (type) + 1 bytes, a tensor info 8 + 4 + 8 + 4 + 8.
  if (n_kv > (size_ - pos_) / 13)
    fail("{}: metadata count {} cannot fit in a file of {} bytes", name, n_kv, size_);
  if (n_tensors > (size_ - pos_) / 32)
    fail("{}: tensor count {} cannot fit in a file of {} bytes", name, n_tensors, size_);

  f_.kv_.reserve(static_cast<size_t>(n_kv));
  for (uint64_t i = 0; i < n_kv; ++i) {
    std::string key(str(fmt::format("metadata key #{}", i)));
    const uint32_t type = u32(fmt::format("the type of metadata '{}'", key));
    GgufValue v = value(type, key, 0);
    if (!f_.kv_index_.emplace(key, f_.kv_.size()).second) fail("{}: metadata '{}' appears twice", name, key);
    f_.kv_.emplace_back(std::move(key), std::move(v));
  }

  if (const GgufValue* a = f_.find("general.alignment")) {
    const auto al = a->to_uint();
    if (a->type() != GgufType::kUint32 || !al)
      fail("{}: metadata 'general.alignment' has type {}, expected UINT32", name, gguf_type_name(a->type()));
    if (*al == 0 || (*al & (*al - 1)) != 0)
      fail("{}: metadata 'general.alignment' is {}, not a power of two", name, *al);
    f_.alignment_ = *al;
  }

  f_.tensors_.reserve(static_cast<size_t>(n_tensors));
  for (uint64_t i = 0; i < n_tensors; ++i) {
    GgufTensorInfo t;
    t.name = std::string(str(fmt::format("tensor name #{}", i)));
    const std::string what = fmt::format("tensor '{}'", t.name);
    const uint32_t nd = u32(what + " (dimension count)");
    if (nd == 0 || nd > kMaxDims) fail("{}: {} has {} dimensions (1 to {} allowed)", name, what, nd, kMaxDims);
    uint64_t numel = 1;
    for (uint32_t d = 0; d < nd; ++d) {
      const uint64_t ne = u64(what + " (dimension)");
      if (ne > static_cast<uint64_t>(INT64_MAX) || mul_overflows(numel, ne, &numel) ||
          numel > static_cast<uint64_t>(INT64_MAX))
        fail("{}: {} has a shape too large (dimension {} = {})", name, what, d, ne);
      t.ne.push_back(static_cast<int64_t>(ne));
    }
    t.type = u32(what + " (type)");
    t.offset = u64(what + " (offset)");
    const GgmlTypeInfo* ti = ggml_type_info(t.type);
    if (!ti) fail("{}: {} has unknown ggml type {}", name, what, ggml_type_name(t.type));
    t.block = ti->block;
    t.block_bytes = ti->block_bytes;
    if (t.type == static_cast<uint32_t>(GgmlType::kI2_S)) {
      if (numel % 4 != 0) fail("{}: {} (I2_S) has {} weights, not a multiple of 4", name, what, numel);
      t.nbytes = numel / 4 + kI2sTailBytes;
    } else if (t.type == static_cast<uint32_t>(GgmlType::kQ2_0)) {
      if (t.ne[0] % kQ2Block64 != 0)
        fail("{}: {} (Q2_0) has ne[0] = {}, not a multiple of the block size 64", name, what, t.ne[0]);
      if (numel > static_cast<uint64_t>(INT64_MAX) / kQ2Bytes64) fail("{}: {} has a byte size too large", name, what);
      t.block = 0;  // decided by resolve_q2_0_layouts once every offset is known
    } else {
      if (t.ne[0] % ti->block != 0)
        fail("{}: {} ({}) has ne[0] = {}, not a multiple of the block size {}", name, what, ti->name, t.ne[0],
             ti->block);
      if (mul_overflows(numel / static_cast<uint64_t>(ti->block), static_cast<uint64_t>(ti->block_bytes), &t.nbytes))
        fail("{}: {} has a byte size too large", name, what);
    }
    if (!f_.tensor_index_.emplace(t.name, f_.tensors_.size()).second)
      fail("{}: tensor '{}' appears twice", name, t.name);
    f_.tensors_.push_back(std::move(t));
  }

  // The data section starts at the next multiple of the alignment (a file with no tensor data may end before).
  const uint64_t al = f_.alignment_;
  uint64_t start = 0;
  if (add_overflows(pos_, al - 1, &start)) fail("{}: data section offset overflows", name);
  start = start / al * al;
  f_.data_offset_ = start;
  const uint64_t data_size = start <= size_ ? size_ - start : 0;
  resolve_q2_0_layouts(data_size);
  uint64_t expect = 0;
  for (GgufTensorInfo& t : f_.tensors_) {
    if (t.offset % al != 0)
      fail("{}: tensor '{}' has offset {}, not a multiple of general.alignment {}", name, t.name, t.offset, al);
    if (t.offset != expect)
      fail("{}: tensor '{}' has offset {}, expected {} (the end of the tensor before it, aligned to {}): the offsets "
           "do not match the shapes and types",
           name, t.name, t.offset, expect, al);
    uint64_t end = 0;
    if (add_overflows(t.offset, t.nbytes, &end) || end > data_size)
      fail("{}: tensor '{}' ({}, {}) needs bytes [{}, {}) of the data section, which has {} (truncated file or a "
           "wrong offset)",
           name, t.name, ggml_type_name(t.type), t.ne_str(), t.offset, t.offset + t.nbytes, data_size);
    t.data = base_ + start + t.offset;
    if (add_overflows(end, al - 1, &expect)) fail("{}: tensor '{}' ends past any file size", name, t.name);
    expect = expect / al * al;
  }
}

// ---- GgufTensorInfo --------------------------------------------------------------------------------------------

int64_t GgufTensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : ne) n *= d;
  return n;
}

std::string GgufTensorInfo::ne_str() const {
  std::string s = "[";
  for (size_t i = 0; i < ne.size(); ++i) s += (i ? ", " : "") + std::to_string(ne[i]);
  return s + "]";
}

// ---- GgufValue element access and rendering --------------------------------------------------------------------

GgufValue GgufValue::at(uint64_t i) const {
  TRITIUM_CHECK(type_ == GgufType::kArray && i < count_, "GgufValue::at({}) on a {} of size {}", i,
                gguf_type_name(type_), count_);
  GgufValue v;
  if (elem_ == GgufType::kString) {
    v.type_ = GgufType::kString;
    v.str_ = strs_[static_cast<size_t>(i)];
    return v;
  }
  if (elem_ == GgufType::kArray) return items_[static_cast<size_t>(i)];
  GgufParser::set_scalar(v, elem_, raw_ + i * min_value_bytes(static_cast<uint32_t>(elem_)));
  return v;
}

std::string GgufValue::summary() const {
  switch (type_) {
    case GgufType::kString: {
      std::string s(str_.substr(0, 60));
      for (char& c : s)
        if (c == '\n' || c == '\r' || c == '\t') c = ' ';
      return fmt::format("\"{}\"{}", s, str_.size() > 60 ? fmt::format("... ({} bytes)", str_.size()) : "");
    }
    case GgufType::kArray: {
      std::string s = fmt::format("{}[{}]", gguf_type_name(elem_), count_);
      if (count_ > 0 && elem_ != GgufType::kArray) s += fmt::format(" {}{}", at(0).summary(), count_ > 1 ? ", ..." : "");
      return s;
    }
    case GgufType::kBool: return u_ ? "true" : "false";
    case GgufType::kFloat32: case GgufType::kFloat64: return fmt::format("{}", f_);
    default: return is_signed(type_) ? std::to_string(i_) : std::to_string(u_);
  }
}

// ---- GgufFile --------------------------------------------------------------------------------------------------

GgufFile GgufFile::open(const std::string& path) {
  GgufFile f;
  f.file_ = MappedFile(path);
  f.name_ = path;
  f.size_ = f.file_.size();
  GgufParser(f, f.file_.data(), f.file_.size()).run();
  return f;
}

GgufFile GgufFile::parse(const uint8_t* data, size_t size, std::string name) {
  GgufFile f;
  f.name_ = std::move(name);
  f.size_ = size;
  static const uint8_t kEmpty[1] = {0};
  GgufParser(f, data ? data : kEmpty, size).run();
  return f;
}

void GgufFile::drop_metadata() {
  std::vector<std::pair<std::string, GgufValue>>().swap(kv_);
  std::unordered_map<std::string, size_t>().swap(kv_index_);
  // Nothing refers to the header's bytes any more (string arrays were views into them): out of the resident set.
  if (file_.data()) release_mapped_pages(file_.data(), static_cast<size_t>(data_offset_));
}

const GgufValue* GgufFile::find(std::string_view key) const {
  auto it = kv_index_.find(std::string(key));
  return it == kv_index_.end() ? nullptr : &kv_[it->second].second;
}

namespace {

[[noreturn]] void wrong_type(const std::string& file, std::string_view key, const GgufValue& v, const char* want) {
  fail("{}: metadata '{}' has type {}{}, expected {}", file, key, gguf_type_name(v.type()),
       v.type() == GgufType::kArray ? fmt::format(" of {}", gguf_type_name(v.elem_type())) : "", want);
}

}  // namespace

std::optional<std::string> GgufFile::find_string(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (auto s = v->to_string()) return std::string(*s);
  wrong_type(name_, key, *v, "STRING");
}

std::optional<uint64_t> GgufFile::find_uint(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (!v->is_integer()) wrong_type(name_, key, *v, "an integer");
  if (auto u = v->to_uint()) return u;
  fail("{}: metadata '{}' is {}, expected a non-negative integer", name_, key, v->summary());
}

std::optional<double> GgufFile::find_float(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (auto d = v->to_float()) return d;
  wrong_type(name_, key, *v, "a number");
}

std::optional<bool> GgufFile::find_bool(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (auto b = v->to_bool()) return b;
  wrong_type(name_, key, *v, "BOOL");
}

#define TRITIUM_GGUF_REQUIRED(find_fn)                                          \
  auto r = find_fn(key);                                                        \
  if (!r) fail("{}: metadata '{}' is missing", name_, key);                     \
  return *r

std::string GgufFile::get_string(std::string_view key) const { TRITIUM_GGUF_REQUIRED(find_string); }
uint64_t GgufFile::get_uint(std::string_view key) const { TRITIUM_GGUF_REQUIRED(find_uint); }
double GgufFile::get_float(std::string_view key) const { TRITIUM_GGUF_REQUIRED(find_float); }
bool GgufFile::get_bool(std::string_view key) const { TRITIUM_GGUF_REQUIRED(find_bool); }
#undef TRITIUM_GGUF_REQUIRED

std::vector<std::string_view> GgufFile::get_string_array(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) fail("{}: metadata '{}' is missing", name_, key);
  if (v->type() != GgufType::kArray || v->elem_type() != GgufType::kString) wrong_type(name_, key, *v, "ARRAY of STRING");
  std::vector<std::string_view> out;
  out.reserve(static_cast<size_t>(v->size()));
  for (uint64_t i = 0; i < v->size(); ++i) out.push_back(*v->at(i).to_string());
  return out;
}

std::vector<int64_t> GgufFile::get_int_array(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) fail("{}: metadata '{}' is missing", name_, key);
  if (v->type() != GgufType::kArray || !is_integer_type(v->elem_type())) wrong_type(name_, key, *v, "ARRAY of integers");
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(v->size()));
  for (uint64_t i = 0; i < v->size(); ++i) {
    const auto x = v->at(i).to_int();
    if (!x) fail("{}: metadata '{}'[{}] is {}, outside int64", name_, key, i, v->at(i).summary());
    out.push_back(*x);
  }
  return out;
}

const GgufTensorInfo* GgufFile::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(std::string(name));
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

const GgufTensorInfo& GgufFile::tensor(std::string_view name) const {
  const GgufTensorInfo* t = find_tensor(name);
  if (!t) fail("{}: tensor '{}' is missing", name_, name);
  return *t;
}

bool is_gguf_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char m[4] = {};
  return in.read(m, 4) && std::memcmp(m, "GGUF", 4) == 0;
}

}  // namespace tritium
