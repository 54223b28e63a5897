#include "model/loader.h"

#ifdef __GLIBC__
#include <malloc.h>
#endif

#include <cmath>
#include <cstring>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>

#include "core/error.h"
#include "core/mapped_file.h"
#include "io/safetensors.h"
#include "model/gguf_loader.h"
#include "model/tritium_model.h"
#include "model/weight_source.h"
#include "quant/int8_projection.h"
#include "quant/ternary_detect.h"
#include "quant/ternary_ptq.h"

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

TernaryWeight ternary_absmean_b158(const std::vector<float>& f) {
  double sum = 0.0;
  for (float v : f) sum += std::fabs(v);
  const float s = std::max(static_cast<float>(sum / static_cast<double>(f.size())), 1e-5f);
  TernaryWeight r;
  r.w.resize(f.size());
  for (size_t i = 0; i < f.size(); ++i)
    r.w[i] = static_cast<int8_t>(std::clamp(std::nearbyint(f[i] / s), -1.0f, 1.0f));
  r.scale = s;
  return r;
}

namespace {

// A Hugging Face folder's safetensors weights.
class SafetensorsSource final : public WeightSource {
 public:
  SafetensorsSource(const WeightStore& ws, const ModelConfig& c)
      : ws_(ws), dir_(c.model_dir), scale_mode_(c.bitnet_scale_mode) {}

  bool has(const std::string& name) const override { return ws_.find(name) != nullptr; }

  std::vector<float> vec(const std::string& name, int64_t n) const override {
    return tensor_to_f32(ws_.get(name, {n}));
  }

  std::vector<float> mat(const std::string& name, int64_t rows, int64_t cols) const override {
    const TensorView& t = ws_.get(name, {rows, cols});
    if (t.dtype != DType::F32 && t.dtype != DType::BF16 && t.dtype != DType::F16)
      fail("{}: weight '{}' has dtype {}, expected BF16, F16 or F32", t.file, name, dtype_name(t.dtype));
    std::vector<float> f = tensor_to_f32(t);
    release_mapped_pages(t.data, t.nbytes);  // converted: the file's bytes need not stay resident
    return f;
  }

  Embedding table(const std::string& name, int64_t rows, int64_t cols) const override {
    const TensorView& t = ws_.get(name, {rows, cols});
    if (t.dtype == DType::BF16 && reinterpret_cast<uintptr_t>(t.data) % alignof(uint16_t) == 0)
      return Embedding::bf16(reinterpret_cast<const uint16_t*>(t.data), rows, cols, {}, t.mapping);
    return WeightSource::table(name, rows, cols);
  }

  // Packed U8 [out/4, in] with weight_scale, or float [out, in]: ternary values (times weight_scale when present),
  // or full precision that BitNet's absmean rule quantizes.
  TernaryWeight ternary(const std::string& prefix, int64_t out, int64_t in) const override {
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

 private:
  const WeightStore& ws_;
  std::string dir_;
  BitNetScaleMode scale_mode_;
};

// Stacks the parts of a fused projection. Each keeps its own scale as a segment; when a part has per-group scales
// (a GGUF ternary tensor whose blocks have different scales) every part is given per-group scales instead.
std::unique_ptr<Linear> fuse_ternary(std::vector<TernaryWeight> parts, int64_t in, TernaryFormat fmt) {
  std::vector<int8_t> all;
  std::vector<TernaryLinear::Segment> segs;
  bool grouped = false;
  for (auto& p : parts) {
    segs.push_back({static_cast<int64_t>(p.w.size()) / in, p.scale});
    all.insert(all.end(), p.w.begin(), p.w.end());
    grouped = grouped || !p.group_scales.empty();
  }
  const int64_t n = static_cast<int64_t>(all.size()) / in;
  auto packed = pack_ternary(fmt, all.data(), n, in);
  if (!grouped) return std::make_unique<TernaryLinear>(std::move(packed), std::move(segs));
  std::vector<float> gs;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (parts[i].group_scales.empty()) gs.insert(gs.end(), static_cast<size_t>(segs[i].rows * packed->groups()), parts[i].scale);
    else gs.insert(gs.end(), parts[i].group_scales.begin(), parts[i].group_scales.end());
  }
  return std::make_unique<TernaryLinear>(std::move(packed), std::move(gs));
}

// Quantizes each part of a fused projection separately (its own statistics, as if unfused) when a PTQ method is set.
std::unique_ptr<Linear> quantize_fused(const LoadOptions& o, const std::vector<std::vector<float>>& parts_w,
                                       const std::vector<int64_t>& rows, std::vector<float> bias, int64_t in) {
  int64_t n = 0;
  for (int64_t r : rows) n += r;
  if (o.quant.rfind("ternary-", 0) == 0) {
    std::vector<int8_t> all;
    std::vector<TernaryLinear::Segment> segs;
    std::vector<float> group_scales;
    const bool grouped = o.quant == "ternary-absmean-g128";
    for (size_t i = 0; i < parts_w.size(); ++i) {
      TernaryQuant tq;
      if (o.quant == "ternary-absmean") tq = ternary_absmean(parts_w[i].data(), rows[i], in);
      else if (grouped) tq = ternary_absmean_grouped(parts_w[i].data(), rows[i], in, kTernaryGroupK);
      else if (o.quant == "ternary-threshold") {
        const float t = o.ternary_threshold > 0 ? o.ternary_threshold
                                                : ternary_twn_threshold(parts_w[i].data(), rows[i] * in);
        tq = ternary_threshold(parts_w[i].data(), rows[i], in, t);
      } else {
        fail("unknown quantization method '{}'", o.quant);
      }
      all.insert(all.end(), tq.q.begin(), tq.q.end());
      if (grouped) group_scales.insert(group_scales.end(), tq.scales.begin(), tq.scales.end());
      else segs.push_back({rows[i], tq.scales.at(0)});
    }
    auto packed = pack_ternary(o.ternary_format, all.data(), n, in);
    auto lin = grouped ? std::make_unique<TernaryLinear>(std::move(packed), std::move(group_scales))
                       : std::make_unique<TernaryLinear>(std::move(packed), std::move(segs));
    lin->set_bias(std::move(bias));
    return lin;
  }
  static const std::map<std::string, std::string> kInt8 = {
      {"int8-absmax", "absmax"},         {"int8-zeropoint", "zeropoint"}, {"int8-rowwise", "rowwise"},
      {"int8-vectorwise", "vectorwise"}, {"llm-int8", "llm.int8"},        {"int8-weight-only", "weight-only"}};
  auto it = kInt8.find(o.quant);
  if (it == kInt8.end()) fail("unknown quantization method '{}'", o.quant);
  std::vector<float> w;
  for (const auto& p : parts_w) w.insert(w.end(), p.begin(), p.end());
  Int8ProjectionOptions io;
  io.outlier_threshold = o.outlier_threshold;
  return std::make_unique<Int8Linear>(Int8Projection(parse_int8_method(it->second), w.data(), n, in,
                                                      bias.empty() ? nullptr : bias.data(), io));
}

// The parts of a fused projection, each ternary times a scale per tensor or per row and group of kTernaryGroupK
// inputs, as one TernaryLinear; nullptr when some part is group-scaled and the backend takes no group scales.
std::unique_ptr<TernaryLinear> fused_ternary(const std::vector<TernaryQuant>& qs, const std::vector<int64_t>& rows,
                                             int64_t in, const LoadOptions& o) {
  bool grouped = false;
  for (const TernaryQuant& q : qs) grouped = grouped || q.group_size != 0;
  if (grouped && !o.ternary_group_scales) return nullptr;
  std::vector<int8_t> all;
  std::vector<TernaryLinear::Segment> segs;
  std::vector<float> gs;
  const int64_t G = (in + kTernaryGroupK - 1) / kTernaryGroupK;
  for (size_t i = 0; i < qs.size(); ++i) {
    all.insert(all.end(), qs[i].q.begin(), qs[i].q.end());
    segs.push_back({rows[i], qs[i].group_size == 0 ? qs[i].scales[0] : 1.0f});
    if (qs[i].group_size == 0) gs.insert(gs.end(), static_cast<size_t>(rows[i] * G), qs[i].scales[0]);
    else gs.insert(gs.end(), qs[i].scales.begin(), qs[i].scales.end());
  }
  int64_t n = 0;
  for (int64_t r : rows) n += r;
  auto packed = pack_ternary(o.ternary_format, all.data(), n, in);
  return grouped ? std::make_unique<TernaryLinear>(std::move(packed), std::move(gs))
                 : std::make_unique<TernaryLinear>(std::move(packed), std::move(segs));
}

// The parts of a fused projection as one TernaryLinear when every part is exactly ternary times a scale per tensor
// or per row and group of kTernaryGroupK inputs (quant/ternary_detect.h); nullptr otherwise.
std::unique_ptr<TernaryLinear> detect_fused_ternary(const std::vector<std::vector<float>>& parts,
                                                    const std::vector<int64_t>& rows, int64_t in, const LoadOptions& o) {
  std::vector<TernaryQuant> qs;
  for (size_t i = 0; i < parts.size(); ++i) {
    auto t = detect_ternary(parts[i].data(), rows[i], in, kTernaryGroupK);
    if (!t) return nullptr;
    qs.push_back(std::move(*t));
  }
  return fused_ternary(qs, rows, in, o);
}

std::unique_ptr<Linear> fuse_float(const WeightSource& ws, const std::vector<std::pair<std::string, int64_t>>& parts,
                                   int64_t in, bool bias, const LoadOptions& o) {
  std::vector<std::vector<float>> ws_parts;
  std::vector<int64_t> rows;
  std::vector<float> b;
  if (o.quant.empty() && o.detect_ternary) {
    // Sources that store ternary values (GGUF Q2_0) give them without a float32 copy: the same result as detection.
    std::vector<TernaryQuant> qs;
    for (const auto& [prefix, r] : parts) {
      auto q = ws.stored_ternary(prefix + ".weight", r, in);
      if (!q) break;
      qs.push_back(std::move(*q));
      rows.push_back(r);
    }
    if (qs.size() == parts.size()) {
      if (auto t = fused_ternary(qs, rows, in, o)) {
        for (const auto& [prefix, r] : parts)
          if (bias) {
            auto v = ws.vec(prefix + ".bias", r);
            b.insert(b.end(), v.begin(), v.end());
          }
        t->set_bias(std::move(b));
        return t;
      }
    }
    rows.clear();
  }
  for (const auto& [prefix, r] : parts) {
    ws_parts.push_back(ws.mat(prefix + ".weight", r, in));
    rows.push_back(r);
    if (bias) {
      auto v = ws.vec(prefix + ".bias", r);
      b.insert(b.end(), v.begin(), v.end());
    }
  }
  if (!o.quant.empty()) return quantize_fused(o, ws_parts, rows, std::move(b), in);
  if (o.detect_ternary) {
    if (auto t = detect_fused_ternary(ws_parts, rows, in, o)) {
      t->set_bias(std::move(b));
      return t;
    }
  }
  std::vector<float> w;
  int64_t n = 0;
  for (size_t i = 0; i < ws_parts.size(); ++i) {
    w.insert(w.end(), ws_parts[i].begin(), ws_parts[i].end());
    n += rows[i];
  }
  return std::make_unique<FloatLinear>(std::move(w), std::move(b), n, in);
}

}  // namespace

const std::vector<std::string>& quant_method_names() {
  static const std::vector<std::string> k = {"int8-absmax",      "int8-zeropoint",  "int8-rowwise",
                                             "int8-vectorwise",  "llm-int8",        "int8-weight-only",
                                             "ternary-absmean",  "ternary-absmean-g128", "ternary-threshold"};
  return k;
}

std::unique_ptr<Transformer> build_transformer(ModelConfig c, const WeightSource& ws, const LoadOptions& opts) {
  if (!opts.quant.empty() && c.bitnet_quant)
    fail("{}: --quant {} applies to 16/32-bit models; this BitNet model is already ternary", c.model_dir, opts.quant);
  const int64_t H = c.hidden_size, I = c.intermediate_size, V = c.vocab_size;
  const int64_t qd = c.q_dim(), kvd = c.kv_dim();

  std::vector<LayerWeights> layers(c.num_layers);
  for (int l = 0; l < c.num_layers; ++l) {
    const std::string p = fmt::format("model.layers.{}.", l);
    LayerWeights& L = layers[l];
    L.input_norm = ws.vec(p + "input_layernorm.weight", H);
    L.post_attn_norm = ws.vec(p + "post_attention_layernorm.weight", H);
    if (c.sub_norms) {
      L.attn_sub_norm = ws.vec(p + "self_attn.attn_sub_norm.weight", qd);
      L.ffn_sub_norm = ws.vec(p + "mlp.ffn_sub_norm.weight", I);
    }
    if (c.qk_norm) {
      L.q_norm = ws.vec(p + "self_attn.q_norm.weight", c.head_dim);
      L.k_norm = ws.vec(p + "self_attn.k_norm.weight", c.head_dim);
    }
    if (c.bitnet_quant) {
      auto ternary = [&](const std::vector<std::pair<std::string, int64_t>>& parts, int64_t in) {
        std::vector<TernaryWeight> ts;
        for (const auto& [prefix, rows] : parts) ts.push_back(ws.ternary(p + prefix, rows, in));
        return fuse_ternary(std::move(ts), in, opts.ternary_format);
      };
      L.qkv = ternary({{"self_attn.q_proj", qd}, {"self_attn.k_proj", kvd}, {"self_attn.v_proj", kvd}}, H);
      L.o = ternary({{"self_attn.o_proj", H}}, qd);
      L.gate_up = ternary({{"mlp.gate_proj", I}, {"mlp.up_proj", I}}, H);
      L.down = ternary({{"mlp.down_proj", H}}, I);
    } else {
      L.qkv = fuse_float(ws, {{p + "self_attn.q_proj", qd}, {p + "self_attn.k_proj", kvd}, {p + "self_attn.v_proj", kvd}},
                         H, c.qkv_bias, opts);
      L.o = fuse_float(ws, {{p + "self_attn.o_proj", H}}, qd, c.o_bias, opts);
      L.gate_up = fuse_float(ws, {{p + "mlp.gate_proj", I}, {p + "mlp.up_proj", I}}, H, c.mlp_bias, opts);
      L.down = fuse_float(ws, {{p + "mlp.down_proj", H}}, I, c.mlp_bias, opts);
    }
    if (opts.progress) opts.progress(l + 1, c.num_layers);
  }
  std::vector<float> final_norm = ws.vec("model.norm.weight", H);
  const bool has_head = ws.has("lm_head.weight");
  const bool tied = c.tie_word_embeddings || !has_head;
  if (!c.tie_word_embeddings && !has_head) fail("{}: weight 'lm_head.weight' is missing", c.model_dir);
  Embedding embed = ws.table("model.embed_tokens.weight", V, H);
  Embedding head_table = tied ? embed : ws.table("lm_head.weight", V, H);
  const std::string head_kind = resolve_lm_head_kind(opts.lm_head, head_table.is_bf16());
  // The default head of a model whose head is ternary (Ternary Bonsai) runs on the ternary kernels.
  std::unique_ptr<Linear> lm_head;
  if ((opts.lm_head.empty() || opts.lm_head == "auto") && opts.detect_ternary && opts.ternary_group_scales)
    lm_head = ternary_head_from_table(head_table, opts.ternary_format);
  if (!lm_head && tied && head_kind == "f32" && embed.is_bf16()) {
    // A float32 head tied to the embedding: both read one float32 table.
    const bool mapped = !embed.owner();
    const Embedding widened = Embedding::f32(embed.f32_table(), V, H);
    if (mapped) release_mapped_pages(embed.bf16_data(), embed.bytes());
    embed = widened;
    head_table = embed;
  }
  if (!lm_head) lm_head = make_head_from_table(head_table, head_kind);
  return std::make_unique<Transformer>(std::move(c), std::move(embed), std::move(layers), std::move(final_norm),
                                       std::move(lm_head));
}

namespace {

// Loading frees float32 copies and unpacked codes as it packs; glibc keeps freed heap memory resident until told.
std::unique_ptr<Transformer> return_freed_memory(std::unique_ptr<Transformer> m) {
#ifdef __GLIBC__
  malloc_trim(0);
#endif
  return m;
}

}  // namespace

std::unique_ptr<Transformer> load_transformer(const std::string& path, const LoadOptions& opts) {
  if (!opts.quant.empty()) {
    const auto& names = quant_method_names();
    if (std::find(names.begin(), names.end(), opts.quant) == names.end())
      fail("unknown quantization method '{}' (expected one of: {})", opts.quant, fmt::join(names, ", "));
  }
  if (!opts.lm_head.empty()) {
    const auto& names = lm_head_kind_names();
    if (std::find(names.begin(), names.end(), opts.lm_head) == names.end())
      fail("unknown lm_head storage '{}' (expected one of: {})", opts.lm_head, fmt::join(names, ", "));
  }
  if (is_gguf_path(path)) return return_freed_memory(load_gguf_transformer(path, opts));
  ModelConfig c = load_model_config(path);
  auto store = std::make_shared<WeightStore>(path);
  if (is_tritium_model(*store)) return load_tritium_model(std::move(c), std::move(store), opts);
  const SafetensorsSource source(*store, c);
  auto model = build_transformer(std::move(c), source, opts);
  model->set_keep_alive(std::move(store));  // borrowed bf16 tables read the mapped file
  return return_freed_memory(std::move(model));
}

}  // namespace tritium
