#include "model/loader.h"

#include <cmath>
#include <cstring>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>

#include "core/error.h"
#include "io/safetensors.h"
#include "model/tritium_model.h"
#include "quant/int8_projection.h"
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

namespace {

struct Ternary {
  std::vector<int8_t> w;  // [out, in]
  float scale;            // multiplier
};

std::vector<float> load_vec(const WeightStore& ws, const std::string& name, int64_t n) {
  const TensorView& t = ws.get(name, {n});
  return tensor_to_f32(t);
}

std::vector<float> load_mat(const WeightStore& ws, const std::string& name, int64_t rows, int64_t cols) {
  const TensorView& t = ws.get(name, {rows, cols});
  if (t.dtype != DType::F32 && t.dtype != DType::BF16 && t.dtype != DType::F16)
    fail("{}: weight '{}' has dtype {}, expected BF16, F16 or F32", t.file, name, dtype_name(t.dtype));
  return tensor_to_f32(t);
}

// A BitNet projection: packed U8 [out/4, in], or float [out, in] (ternary values, or full precision that we
// quantize with BitNet's absmean rule).
Ternary load_ternary(const WeightStore& ws, const ModelConfig& c, const std::string& prefix, int64_t out,
                     int64_t in) {
  const std::string wname = prefix + ".weight";
  const TensorView& t = ws.get(wname);
  Ternary r;
  const TensorView* sc = ws.find(prefix + ".weight_scale");
  float ws_val = 1.0f;
  if (sc) {
    if (sc->numel() != 1)
      fail("{}: weight '{}' must hold one value (per-tensor scale), has shape {}", sc->file, sc->name,
           sc->shape_str());
    ws_val = tensor_scalar_f32(*sc, 0);
    if (!std::isfinite(ws_val) || ws_val == 0.0f)
      fail("{}: weight '{}' is {} (must be finite and non-zero)", sc->file, sc->name, ws_val);
  }
  if (t.dtype == DType::U8 || t.dtype == DType::I8) {
    if (t.shape != std::vector<int64_t>{out / 4, in})
      fail("{}: weight '{}' has shape {}, expected packed [{}, {}] (out/4, in)", t.file, wname, t.shape_str(),
           out / 4, in);
    if (!sc) fail("{}: weight '{}.weight_scale' is missing", c.model_dir, prefix);
    r.w = unpack_bitnet_weight(t.data, out, in);
    r.scale = c.bitnet_scale_mode == BitNetScaleMode::kMultiply ? ws_val : 1.0f / ws_val;
    return r;
  }
  std::vector<float> f = load_mat(ws, wname, out, in);
  bool ternary = true;
  for (float v : f)
    if (v != 0.0f && v != 1.0f && v != -1.0f) { ternary = false; break; }
  r.w.resize(f.size());
  if (ternary) {
    for (size_t i = 0; i < f.size(); ++i) r.w[i] = static_cast<int8_t>(f[i]);
    r.scale = sc ? (c.bitnet_scale_mode == BitNetScaleMode::kMultiply ? ws_val : 1.0f / ws_val) : 1.0f;
    return r;
  }
  // Full-precision weights: BitNet b1.58 absmean quantization, scale = mean|W|, w = clamp(round(W / scale), -1, 1).
  double sum = 0.0;
  for (float v : f) sum += std::fabs(v);
  const float s = std::max(static_cast<float>(sum / static_cast<double>(f.size())), 1e-5f);
  for (size_t i = 0; i < f.size(); ++i)
    r.w[i] = static_cast<int8_t>(std::clamp(std::nearbyint(f[i] / s), -1.0f, 1.0f));
  r.scale = s;
  return r;
}

std::unique_ptr<Linear> fuse_ternary(std::vector<Ternary> parts, int64_t in, TernaryFormat fmt) {
  std::vector<int8_t> all;
  std::vector<TernaryLinear::Segment> segs;
  for (auto& p : parts) {
    segs.push_back({static_cast<int64_t>(p.w.size()) / in, p.scale});
    all.insert(all.end(), p.w.begin(), p.w.end());
  }
  const int64_t n = static_cast<int64_t>(all.size()) / in;
  return std::make_unique<TernaryLinear>(pack_ternary(fmt, all.data(), n, in), std::move(segs));
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

std::unique_ptr<Linear> fuse_float(const WeightStore& ws, const std::vector<std::pair<std::string, int64_t>>& parts,
                                   int64_t in, bool bias, const LoadOptions& o) {
  if (!o.quant.empty()) {
    std::vector<std::vector<float>> ws_parts;
    std::vector<int64_t> rows;
    std::vector<float> b;
    for (const auto& [prefix, r] : parts) {
      ws_parts.push_back(load_mat(ws, prefix + ".weight", r, in));
      rows.push_back(r);
      if (bias) {
        auto v = load_vec(ws, prefix + ".bias", r);
        b.insert(b.end(), v.begin(), v.end());
      }
    }
    return quantize_fused(o, ws_parts, rows, std::move(b), in);
  }
  std::vector<float> w, b;
  int64_t n = 0;
  for (const auto& [prefix, rows] : parts) {
    auto m = load_mat(ws, prefix + ".weight", rows, in);
    w.insert(w.end(), m.begin(), m.end());
    if (bias) {
      auto v = load_vec(ws, prefix + ".bias", rows);
      b.insert(b.end(), v.begin(), v.end());
    }
    n += rows;
  }
  return std::make_unique<FloatLinear>(std::move(w), std::move(b), n, in);
}

}  // namespace

const std::vector<std::string>& lm_head_kind_names() {
  static const std::vector<std::string> k = {"f32", "int8", "q4"};
  return k;
}

std::unique_ptr<Linear> make_head_linear(std::vector<float> w, int64_t vocab, int64_t hidden, const std::string& kind) {
  TRITIUM_CHECK(static_cast<int64_t>(w.size()) == vocab * hidden, "lm_head: {} weights, expected {} x {}", w.size(),
                vocab, hidden);
  if (kind.empty() || kind == "f32") return std::make_unique<FloatLinear>(std::move(w), std::vector<float>{}, vocab, hidden);
  if (kind == "int8")
    return std::make_unique<Int8Linear>(Int8Projection(Int8Method::kVectorwise, w.data(), vocab, hidden));
  if (kind == "q4") {
    if (hidden % 64 != 0) fail("--lm-head q4 needs a hidden size that is a multiple of 64 (this model has {})", hidden);
    return std::make_unique<Q4Linear>(quantize_q4_rows(w.data(), vocab, hidden));
  }
  fail("unknown lm_head storage '{}' (expected f32, int8 or q4)", kind);
}

const std::vector<std::string>& quant_method_names() {
  static const std::vector<std::string> k = {"int8-absmax",      "int8-zeropoint",  "int8-rowwise",
                                             "int8-vectorwise",  "llm-int8",        "int8-weight-only",
                                             "ternary-absmean",  "ternary-absmean-g128", "ternary-threshold"};
  return k;
}

std::unique_ptr<Transformer> load_transformer(const std::string& dir, const LoadOptions& opts) {
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
  ModelConfig c = load_model_config(dir);
  auto store = std::make_shared<WeightStore>(dir);
  if (is_tritium_model(*store)) return load_tritium_model(std::move(c), std::move(store), opts);
  if (!opts.quant.empty() && c.bitnet_quant)
    fail("{}: --quant {} applies to 16/32-bit models; this BitNet model is already ternary", dir, opts.quant);
  const WeightStore& ws = *store;
  const int64_t H = c.hidden_size, I = c.intermediate_size, V = c.vocab_size;
  const int64_t qd = c.q_dim(), kvd = c.kv_dim();

  auto embed = std::make_shared<const std::vector<float>>(load_mat(ws, "model.embed_tokens.weight", V, H));
  std::vector<LayerWeights> layers(c.num_layers);
  for (int l = 0; l < c.num_layers; ++l) {
    const std::string p = fmt::format("model.layers.{}.", l);
    LayerWeights& L = layers[l];
    L.input_norm = load_vec(ws, p + "input_layernorm.weight", H);
    L.post_attn_norm = load_vec(ws, p + "post_attention_layernorm.weight", H);
    if (c.sub_norms) {
      L.attn_sub_norm = load_vec(ws, p + "self_attn.attn_sub_norm.weight", qd);
      L.ffn_sub_norm = load_vec(ws, p + "mlp.ffn_sub_norm.weight", I);
    }
    if (c.bitnet_quant) {
      auto ternary = [&](const std::vector<std::pair<std::string, int64_t>>& parts, int64_t in) {
        std::vector<Ternary> ts;
        for (const auto& [prefix, rows] : parts) ts.push_back(load_ternary(ws, c, p + prefix, rows, in));
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
  std::vector<float> final_norm = load_vec(ws, "model.norm.weight", H);
  std::unique_ptr<Linear> lm_head;
  const TensorView* head = ws.find("lm_head.weight");
  if (c.tie_word_embeddings || !head) {
    if (!c.tie_word_embeddings && !head) fail("{}: weight 'lm_head.weight' is missing", dir);
    if (opts.lm_head.empty() || opts.lm_head == "f32") lm_head = std::make_unique<FloatLinear>(embed, std::vector<float>{}, V, H);
    else lm_head = make_head_linear(*embed, V, H, opts.lm_head);
  } else {
    lm_head = make_head_linear(load_mat(ws, "lm_head.weight", V, H), V, H, opts.lm_head);
  }
  return std::make_unique<Transformer>(std::move(c), std::move(embed), std::move(layers), std::move(final_norm),
                                       std::move(lm_head));
}

}  // namespace tritium
