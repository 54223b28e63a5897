#include "model/source_safetensors.h"

#include <cmath>

#include "core/error.h"
#include "core/mapped_file.h"

namespace tritium {

std::vector<int8_t> unpack_bitnet_weight(const uint8_t* packed, int64_t out_features, int64_t in_features) {
  TRITIUM_CHECK(out_features % 4 == 0, "BitNet packed weight: out_features {} is not a multiple of 4", out_features);
  const int64_t rows4 = out_features / 4;
  std::vector<int8_t> w(static_cast<size_t>(out_features * in_features));
  for (int64_t r = 0; r < rows4; ++r)
    for (int64_t c = 0; c < in_features; ++c) {
      const uint8_t b = packed[r * in_features + c];
      for (int j = 0; j < 4; ++j) {
        const int code = (b >> (2 * j)) & 3;
        if (code == 3) fail("BitNet packed weight: invalid 2-bit code 3 at row {}, column {}", r + j * rows4, c);
        w[(r + j * rows4) * in_features + c] = static_cast<int8_t>(code - 1);
      }
    }
  return w;
}

SafetensorsSource::SafetensorsSource(const WeightStore& ws, const ModelConfig& c)
    : ws_(ws), dir_(c.model_dir), scale_mode_(c.bitnet_scale_mode) {}

bool SafetensorsSource::has(const std::string& name) const { return ws_.find(name) != nullptr; }

std::vector<float> SafetensorsSource::vec(const std::string& name, int64_t n) const {
  return tensor_to_f32(ws_.get(name, {n}));
}

std::vector<float> SafetensorsSource::mat(const std::string& name, int64_t rows, int64_t cols) const {
  const TensorView& t = ws_.get(name, {rows, cols});
  if (t.dtype != DType::F32 && t.dtype != DType::BF16 && t.dtype != DType::F16)
    fail("{}: weight '{}' has dtype {}, expected BF16, F16 or F32", t.file, name, dtype_name(t.dtype));
  std::vector<float> f = tensor_to_f32(t);
  release_mapped_pages(t.data, t.nbytes);  // converted: the file's bytes need not stay resident
  return f;
}

Embedding SafetensorsSource::table(const std::string& name, int64_t rows, int64_t cols) const {
  const TensorView& t = ws_.get(name, {rows, cols});
  if (t.dtype == DType::BF16 && reinterpret_cast<uintptr_t>(t.data) % alignof(uint16_t) == 0)
    return Embedding::bf16(reinterpret_cast<const uint16_t*>(t.data), rows, cols, {}, t.mapping);
  return WeightSource::table(name, rows, cols);
}

// Packed U8 [out/4, in] with weight_scale, or float [out, in]: ternary values (times weight_scale when present),
// or full precision that BitNet's absmean rule quantizes.
TernaryWeight SafetensorsSource::ternary(const std::string& prefix, int64_t out, int64_t in) const {
  const std::string wname = prefix + ".weight";
  const TensorView& t = ws_.get(wname);
  const TensorView* sc = ws_.find(prefix + ".weight_scale");
  float ws_val = 1.0f;
  if (sc) {
    if (sc->numel() != 1)
      fail("{}: weight '{}' must hold one value (per-tensor scale), has shape {}", sc->file, sc->name,
           sc->shape_str());
    ws_val = tensor_scalar_f32(*sc, 0);
    if (!std::isfinite(ws_val) || ws_val == 0.0f)
      fail("{}: weight '{}' is {} (must be finite and non-zero)", sc->file, sc->name, ws_val);
  }
  const float scale = scale_mode_ == BitNetScaleMode::kMultiply ? ws_val : 1.0f / ws_val;
  TernaryWeight r;
  if (t.dtype == DType::U8 || t.dtype == DType::I8) {
    if (t.shape != std::vector<int64_t>{out / 4, in})
      fail("{}: weight '{}' has shape {}, expected packed [{}, {}] (out/4, in)", t.file, wname, t.shape_str(),
           out / 4, in);
    if (!sc) fail("{}: weight '{}.weight_scale' is missing", dir_, prefix);
    r.w = unpack_bitnet_weight(t.data, out, in);
    release_mapped_pages(t.data, t.nbytes);  // repacked by the caller: the file's bytes need not stay resident
    r.scale = scale;
    return r;
  }
  std::vector<float> f = mat(wname, out, in);
  for (float v : f)
    if (v != 0.0f && v != 1.0f && v != -1.0f) return ternary_absmean_b158(f);
  r.w.resize(f.size());
  for (size_t i = 0; i < f.size(); ++i) r.w[i] = static_cast<int8_t>(f[i]);
  r.scale = sc ? scale : 1.0f;
  return r;
}

}  // namespace tritium
