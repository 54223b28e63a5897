#include "model/tritium_model.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <deque>
#include <filesystem>

#include "core/dtype.h"
#include "core/error.h"
#include "core/mapped_file.h"
#include "model/gguf_config.h"
#include "model/gguf_tokenizer.h"
#include "model/linear.h"
#include "model/lm_head.h"
#include "formats/q4_rows.h"
#include "formats/q6_rows.h"

namespace fs = std::filesystem;

namespace tritium {
namespace {

using json = nlohmann::json;

// Collects tensors to write; owns converted copies.
// write_safetensors lays tensors out back to back in the order given (from an 8-byte aligned data section), so
// the sink inserts small U8 padding tensors ("tritium.pad.<i>") to start every tensor at a multiple of 64 bytes:
// packed buffers are then used in place (bitcos needs 8-byte alignment, the kernels like whole cache lines).
class TensorSink {
 public:
  static constexpr size_t kAlign = 64;
  void add(std::string name, DType dt, std::vector<int64_t> shape, const void* data, size_t nbytes) {
    if (offset_ % kAlign != 0) {
      const size_t pad = kAlign - offset_ % kAlign;
      tensors_.push_back({fmt::format("tritium.pad.{}", pads_++), DType::U8, {static_cast<int64_t>(pad)}, kZeros, pad});
      offset_ += pad;
    }
    tensors_.push_back({std::move(name), dt, std::move(shape), data, nbytes});
    offset_ += nbytes;
  }
  // Float32 values, written as BF16 when every value is exactly a bf16 (lossless), else F32.
  void add_float(std::string name, const float* p, std::vector<int64_t> shape) {
    size_t n = 1;
    for (int64_t d : shape) n *= static_cast<size_t>(d);
    bool exact = true;
    for (size_t i = 0; i < n && exact; ++i) {
      const float back = bf16_to_f32(f32_to_bf16(p[i]));
      exact = std::memcmp(&back, &p[i], 4) == 0;
    }
    if (!exact) {
      add(std::move(name), DType::F32, std::move(shape), p, n * 4);
      return;
    }
    auto& buf = u16_.emplace_back(n);
    for (size_t i = 0; i < n; ++i) buf[i] = f32_to_bf16(p[i]);
    add(std::move(name), DType::BF16, std::move(shape), buf.data(), n * 2);
  }
  /// Keeps a float vector alive until the file is written; returns its data.
  const float* keep(std::vector<float> v) { return f32_.emplace_back(std::move(v)).data(); }
  const std::vector<TensorToWrite>& tensors() const { return tensors_; }

 private:
  static constexpr uint8_t kZeros[kAlign] = {};
  size_t offset_ = 0;
  int pads_ = 0;
  std::deque<std::vector<float>> f32_;
  std::vector<TensorToWrite> tensors_;
  std::deque<std::vector<uint16_t>> u16_;
};

json write_linear(TensorSink& sink, const std::string& name, const Linear& lin) {
  const int64_t N = lin.out_features(), K = lin.in_features();
  json j = {{"rows", N}, {"cols", K}};
  auto add_bias = [&](const std::vector<float>& b) {
    j["bias"] = !b.empty();
    if (!b.empty()) sink.add(name + ".bias", DType::F32, {N}, b.data(), b.size() * 4);
  };
  if (const auto* t = dynamic_cast<const TernaryLinear*>(&lin)) {
    j["kind"] = "ternary";
    j["format"] = std::string(ternary_format_name(t->packed().format()));
    json bufs = json::array();
    for (const TernaryBuffer& b : t->packed().buffers()) {
      bufs.push_back(std::string(b.name));
      sink.add(name + "." + std::string(b.name), DType::U8, {static_cast<int64_t>(b.bytes.size())}, b.bytes.data(),
               b.bytes.size());
    }
    j["buffers"] = bufs;
    if (t->has_group_scales()) {
      j["group_scales"] = true;
      std::vector<float> gs = t->group_scales();
      const size_t bytes = gs.size() * 4;
      sink.add(name + ".group_scales", DType::F32, {N, t->packed().groups()}, sink.keep(std::move(gs)), bytes);
    } else {
      json rows = json::array();
      for (const auto& s : t->segments()) rows.push_back(s.rows);
      j["segment_rows"] = rows;
      // Segment scales live in a tensor so they stay exact floats.
      std::vector<float> sc;
      for (const auto& s : t->segments()) sc.push_back(s.scale);
      const size_t n = sc.size();
      sink.add(name + ".segment_scales", DType::F32, {static_cast<int64_t>(n)}, sink.keep(std::move(sc)), n * 4);
    }
    add_bias(t->bias());
  } else if (const auto* q = dynamic_cast<const Int8Linear*>(&lin)) {
    const Int8Weight& w = q->impl().weight();
    j["kind"] = "int8";
    j["method"] = std::string(int8_method_name(w.method));
    j["zero"] = w.zero;
    j["outlier_threshold"] = q->impl().options().outlier_threshold;
    j["outlier_weights"] = q->impl().options().outlier_weights == OutlierWeights::kFp16Copy ? "fp16-copy" : "int8-dequant";
    sink.add(name + ".q", DType::I8, {N, K}, w.q.data(), w.q.size());
    sink.add(name + ".scale", DType::F32, {static_cast<int64_t>(w.scale.size())}, w.scale.data(), w.scale.size() * 4);
    j["f16"] = !w.f16.empty();
    if (!w.f16.empty()) sink.add(name + ".f16", DType::F16, {N, K}, w.f16.data(), w.f16.size() * 2);
    add_bias(q->impl().bias());
  } else if (const auto* h = dynamic_cast<const Q4Linear*>(&lin)) {
    j["kind"] = "q4";
    sink.add(name + ".codes", DType::U8, {N, K / 2}, h->weights().codes.data(), h->weights().codes.size());
    sink.add(name + ".scales", DType::F16, {N, K / kQ4Group}, h->weights().scales.data(),
             h->weights().scales.size() * 2);
  } else if (const auto* h6 = dynamic_cast<const Q6Linear*>(&lin)) {
    j["kind"] = "q6";
    sink.add(name + ".codes", DType::U8, {N, h6->weights().row_bytes()}, h6->weights().codes.data(),
             h6->weights().codes.size());
    sink.add(name + ".scales", DType::F16, {N, K / kQ6Group}, h6->weights().scales.data(),
             h6->weights().scales.size() * 2);
  } else if (const auto* f = dynamic_cast<const FloatLinear*>(&lin)) {
    j["kind"] = "float";
    sink.add_float(name + ".weight", f->weight().data(), {N, K});
    add_bias(f->bias());
  } else if (const auto* b = dynamic_cast<const Bf16Linear*>(&lin)) {
    j["kind"] = "float";
    sink.add(name + ".weight", DType::BF16, {N, K}, b->data(), b->weight_bytes());
    j["bias"] = false;
  } else {
    fail("convert: linear '{}' has storage '{}' that tritium models cannot hold", name, lin.format_name());
  }
  return j;
}

const char* kProj[4] = {"qkv", "o", "gate_up", "down"};

}  // namespace

void write_tritium_model(const Transformer& model, const std::string& src_dir, const std::string& out_dir,
                         const TritiumWriteInfo& info, const std::function<void(int, int)>& progress) {
  std::error_code ec;
  if (fs::exists(out_dir) && fs::equivalent(src_dir, out_dir, ec))
    fail("convert: the output folder {} is the source folder", out_dir);
  fs::create_directories(out_dir, ec);
  if (ec) fail("{}: cannot create the output folder: {}", out_dir, ec.message());
  const ModelConfig& c = model.config();
  const int64_t H = c.hidden_size;
  TensorSink sink;
  json layout = {{"version", 1}, {"source", info.source}, {"weights", info.weights},
                 {"quant", info.quant},  {"lm_head", info.lm_head}};
  json linears = json::object();
  if (const uint16_t* e = model.embed().bf16_data())
    sink.add("model.embed_tokens.weight", DType::BF16, {c.vocab_size, H}, e, model.embed().bytes());
  else
    sink.add_float("model.embed_tokens.weight", model.embedding().data(), {c.vocab_size, H});
  const auto& layers = model.layers();
  for (size_t l = 0; l < layers.size(); ++l) {
    const LayerWeights& L = layers[l];
    const std::string p = fmt::format("model.layers.{}.", l);
    sink.add_float(p + "input_layernorm.weight", L.input_norm.data(), {H});
    sink.add_float(p + "post_attention_layernorm.weight", L.post_attn_norm.data(), {H});
    if (!L.attn_sub_norm.empty())
      sink.add_float(p + "self_attn.attn_sub_norm.weight", L.attn_sub_norm.data(), {static_cast<int64_t>(L.attn_sub_norm.size())});
    if (!L.ffn_sub_norm.empty())
      sink.add_float(p + "mlp.ffn_sub_norm.weight", L.ffn_sub_norm.data(), {static_cast<int64_t>(L.ffn_sub_norm.size())});
    if (!L.q_norm.empty()) {
      sink.add_float(p + "self_attn.q_norm.weight", L.q_norm.data(), {static_cast<int64_t>(L.q_norm.size())});
      sink.add_float(p + "self_attn.k_norm.weight", L.k_norm.data(), {static_cast<int64_t>(L.k_norm.size())});
    }
    const Linear* lins[4] = {L.qkv.get(), L.o.get(), L.gate_up.get(), L.down.get()};
    for (int i = 0; i < 4; ++i) linears[p + kProj[i]] = write_linear(sink, p + kProj[i], *lins[i]);
    if (progress) progress(static_cast<int>(l + 1), static_cast<int>(layers.size()) + 1);
  }
  sink.add_float("model.norm.weight", model.final_norm().data(), {H});
  if (model.head_shares_embedding()) linears["lm_head"] = {{"kind", "tied"}};
  else linears["lm_head"] = write_linear(sink, "lm_head", model.lm_head());
  layout["linears"] = linears;

  const fs::path tmp = fs::path(out_dir) / "model.safetensors.partial";
  write_safetensors(tmp.string(), sink.tensors(), {{"tritium.version", "1"}, {kTritiumLayoutKey, layout.dump()}});
  fs::rename(tmp, fs::path(out_dir) / "model.safetensors", ec);
  if (ec) fail("{}: cannot rename {}: {}", out_dir, tmp.string(), ec.message());
  fs::remove(fs::path(out_dir) / "model.safetensors.index.json", ec);
  if (is_gguf_path(src_dir)) {
    // A GGUF file holds its config, tokenizer and template as metadata: written out as the Hugging Face files.
    write_gguf_side_files(GgufFile::open(src_dir), out_dir);
  } else {
    // Everything but weights: config.json, tokenizer files, generation_config.json, chat templates, ...
    for (const auto& e : fs::directory_iterator(src_dir)) {
      if (!e.is_regular_file()) continue;
      const std::string fn = e.path().filename().string();
      if (fn.ends_with(".safetensors") || fn == "model.safetensors.index.json" || fn.ends_with(".bin") ||
          fn.ends_with(".pt") || fn.ends_with(".gguf"))
        continue;
      fs::copy_file(e.path(), fs::path(out_dir) / fn, fs::copy_options::overwrite_existing, ec);
      if (ec) fail("{}: cannot copy {}: {}", out_dir, e.path().string(), ec.message());
    }
  }
  if (progress) progress(static_cast<int>(layers.size()) + 1, static_cast<int>(layers.size()) + 1);
}

bool is_tritium_model(const WeightStore& ws) {
  const json& md = ws.metadata();
  return md.is_object() && md.contains(kTritiumLayoutKey);
}

namespace {

struct Reader {
  const WeightStore& ws;
  std::string file;

  const TensorView& tensor(const std::string& name, DType dt, const std::vector<int64_t>& shape) const {
    const TensorView* t = ws.find(name);
    if (!t) fail("{}: tritium model: tensor '{}' is missing", file, name);
    if (t->dtype != dt)
      fail("{}: tritium model: tensor '{}' has dtype {}, expected {}", file, name, dtype_name(t->dtype), dtype_name(dt));
    if (!shape.empty() && t->shape != shape) {
      TensorView want;
      want.shape = shape;
      fail("{}: tritium model: tensor '{}' has shape {}, expected {}", file, name, t->shape_str(), want.shape_str());
    }
    return *t;
  }
  std::vector<float> floats(const std::string& name, const std::vector<int64_t>& shape) const {
    const TensorView* t = ws.find(name);
    if (!t) fail("{}: tritium model: tensor '{}' is missing", file, name);
    if (t->dtype != DType::F32 && t->dtype != DType::BF16)
      fail("{}: tritium model: tensor '{}' has dtype {}, expected F32 or BF16", file, name, dtype_name(t->dtype));
    return tensor_to_f32(tensor(name, t->dtype, shape));
  }
  std::vector<float> bias(const json& j, const std::string& name, int64_t n) const {
    if (!j.value("bias", false)) return {};
    return tensor_to_f32(tensor(name + ".bias", DType::F32, {n}));
  }

  std::unique_ptr<Linear> linear(const std::string& name, const json& j, int64_t N, int64_t K,
                                 const LoadOptions& opts) const {
    if (!j.is_object()) fail("{}: tritium model: layout has no entry for linear '{}'", file, name);
    const std::string kind = j.value("kind", "");
    if (j.value("rows", int64_t{-1}) != N || j.value("cols", int64_t{-1}) != K)
      fail("{}: tritium model: linear '{}' is [{}, {}] in the layout, the config needs [{}, {}]", file, name,
           j.value("rows", int64_t{-1}), j.value("cols", int64_t{-1}), N, K);
    if (kind == "ternary") {
      const std::string fname = j.value("format", "");
      TernaryFormat f;
      try {
        f = parse_ternary_format(fname);
      } catch (const Error&) {
        fail("{}: tritium model: linear '{}' has unknown ternary format '{}'", file, name, fname);
      }
      if (!j.contains("buffers") || !j["buffers"].is_array())
        fail("{}: tritium model: linear '{}' lists no buffers", file, name);
      std::vector<std::span<const uint8_t>> spans;
      for (const auto& b : j["buffers"]) {
        if (!b.is_string()) fail("{}: tritium model: linear '{}' has a non-string buffer name", file, name);
        const TensorView& t = tensor(name + "." + b.get<std::string>(), DType::U8, {});
        spans.emplace_back(t.data, t.nbytes);
      }
      std::unique_ptr<PackedTernary> packed = ternary_from_buffers(f, N, K, spans, /*copy=*/false);
      if (opts.ternary_format_explicit && opts.ternary_format != f) {
        std::vector<int8_t> w(static_cast<size_t>(N * K));
        packed->unpack(w.data());
        packed = pack_ternary(opts.ternary_format, w.data(), N, K);
      }
      std::unique_ptr<TernaryLinear> lin;
      if (j.value("group_scales", false)) {
        lin = std::make_unique<TernaryLinear>(
            std::move(packed), tensor_to_f32(tensor(name + ".group_scales", DType::F32, {N, (K + kTernaryGroupK - 1) / kTernaryGroupK})));
      } else {
        if (!j.contains("segment_rows") || !j["segment_rows"].is_array())
          fail("{}: tritium model: linear '{}' has neither segment_rows nor group_scales", file, name);
        const auto& rows = j["segment_rows"];
        std::vector<float> sc =
            tensor_to_f32(tensor(name + ".segment_scales", DType::F32, {static_cast<int64_t>(rows.size())}));
        std::vector<TernaryLinear::Segment> segs;
        for (size_t i = 0; i < rows.size(); ++i) {
          if (!rows[i].is_number_integer() || rows[i].get<int64_t>() <= 0)
            fail("{}: tritium model: linear '{}' has an invalid segment row count {}", file, name, rows[i].dump());
          segs.push_back({rows[i].get<int64_t>(), sc[i]});
        }
        lin = std::make_unique<TernaryLinear>(std::move(packed), std::move(segs));
      }
      lin->set_bias(bias(j, name, N));
      return lin;
    }
    if (kind == "int8") {
      Int8Weight w;
      w.method = parse_int8_method(j.value("method", ""));
      w.n = N;
      w.k = K;
      const TensorView& q = tensor(name + ".q", DType::I8, {N, K});
      w.q.assign(reinterpret_cast<const int8_t*>(q.data), reinterpret_cast<const int8_t*>(q.data) + q.nbytes);
      const bool per_tensor = w.method == Int8Method::kAbsmax || w.method == Int8Method::kZeropoint;
      w.scale = tensor_to_f32(tensor(name + ".scale", DType::F32, {per_tensor ? 1 : N}));
      w.zero = j.value("zero", 0);
      Int8ProjectionOptions io;
      io.outlier_threshold = j.value("outlier_threshold", 6.0f);
      const std::string ow = j.value("outlier_weights", "fp16-copy");
      if (ow != "fp16-copy" && ow != "int8-dequant")
        fail("{}: tritium model: linear '{}' has unknown outlier_weights '{}'", file, name, ow);
      io.outlier_weights = ow == "fp16-copy" ? OutlierWeights::kFp16Copy : OutlierWeights::kInt8Dequant;
      if (j.value("f16", false)) {
        const TensorView& h = tensor(name + ".f16", DType::F16, {N, K});
        w.f16.resize(static_cast<size_t>(N * K));
        std::memcpy(w.f16.data(), h.data, h.nbytes);
      }
      return std::make_unique<Int8Linear>(Int8Projection(std::move(w), bias(j, name, N), io));
    }
    if (kind == "q4") {
      Q4Rows q;
      q.n = N;
      q.k = K;
      if (K % 64 != 0) fail("{}: tritium model: q4 linear '{}' has width {} (must be a multiple of 64)", file, name, K);
      const TensorView& c = tensor(name + ".codes", DType::U8, {N, K / 2});
      const TensorView& s = tensor(name + ".scales", DType::F16, {N, K / kQ4Group});
      q.codes.assign(c.data, c.data + c.nbytes);
      q.scales.resize(static_cast<size_t>(N * K / kQ4Group));
      std::memcpy(q.scales.data(), s.data, s.nbytes);
      return std::make_unique<Q4Linear>(std::move(q));
    }
    if (kind == "q6") {
      Q6Rows q;
      q.n = N;
      q.k = K;
      if (K % 64 != 0) fail("{}: tritium model: q6 linear '{}' has width {} (must be a multiple of 64)", file, name, K);
      const TensorView& c = tensor(name + ".codes", DType::U8, {N, q.row_bytes()});
      const TensorView& s = tensor(name + ".scales", DType::F16, {N, K / kQ6Group});
      q.codes.assign(c.data, c.data + c.nbytes);
      q.scales.resize(static_cast<size_t>(N * K / kQ6Group));
      std::memcpy(q.scales.data(), s.data, s.nbytes);
      return std::make_unique<Q6Linear>(std::move(q));
    }
    if (kind == "float") {
      return std::make_unique<FloatLinear>(floats(name + ".weight", {N, K}), bias(j, name, N), N, K);
    }
    fail("{}: tritium model: linear '{}' has unknown kind '{}'", file, name, kind);
  }
};

// load_tritium_model without its last guard against json exceptions (below).
std::unique_ptr<Transformer> load_checked(ModelConfig c, std::shared_ptr<const WeightStore> wsp, const LoadOptions& opts) {
  const WeightStore& ws = *wsp;
  const std::string file = ws.files().front()->path();
  if (!opts.quant.empty())
    fail("{}: --quant {}: this tritium model is already converted (quantize the original model instead)", file,
         opts.quant);
  json layout;
  const json& md = ws.metadata();
  if (!md[kTritiumLayoutKey].is_string()) fail("{}: tritium model: metadata '{}' is not a string", file, kTritiumLayoutKey);
  try {
    layout = json::parse(md[kTritiumLayoutKey].get<std::string>());
  } catch (const json::exception& e) {
    fail("{}: tritium model: metadata '{}' is not valid JSON: {}", file, kTritiumLayoutKey, e.what());
  }
  if (!layout.is_object() || !layout.contains("version") || layout["version"] != 1)
    fail("{}: tritium model: unsupported layout version {}", file, layout.is_object() && layout.contains("version") ? layout["version"].dump() : "(none)");
  if (!layout.contains("linears") || !layout["linears"].is_object())
    fail("{}: tritium model: layout has no 'linears' object", file);
  const json& lj = layout["linears"];
  Reader rd{ws, file};
  const int64_t H = c.hidden_size, I = c.intermediate_size, V = c.vocab_size;
  const int64_t qd = c.q_dim(), kvd = c.kv_dim();
  auto get = [&](const std::string& n) -> const json& {
    static const json kNull;
    return lj.contains(n) ? lj[n] : kNull;
  };
  auto linear = [&](const std::string& n, int64_t N, int64_t K) {
    try {
      return rd.linear(n, get(n), N, K, opts);
    } catch (const json::exception& e) {
      fail("{}: tritium model: linear '{}': malformed layout entry: {}", file, n, e.what());
    } catch (const Error& e) {
      const std::string msg = e.what();
      if (msg.rfind(file, 0) == 0) throw;
      fail("{}: tritium model: linear '{}': {}", file, n, msg);
    }
  };
  Embedding embed;
  if (const TensorView* et = ws.find("model.embed_tokens.weight"); et && et->dtype == DType::BF16)
    embed = Embedding::bf16(reinterpret_cast<const uint16_t*>(rd.tensor(et->name, DType::BF16, {V, H}).data), V, H,
                            {}, et->mapping);
  else
    embed = Embedding::f32(std::make_shared<const std::vector<float>>(rd.floats("model.embed_tokens.weight", {V, H})), V, H);
  std::vector<LayerWeights> layers(c.num_layers);
  for (int l = 0; l < c.num_layers; ++l) {
    const std::string p = fmt::format("model.layers.{}.", l);
    LayerWeights& L = layers[l];
    L.input_norm = rd.floats(p + "input_layernorm.weight", {H});
    L.post_attn_norm = rd.floats(p + "post_attention_layernorm.weight", {H});
    if (c.sub_norms) {
      L.attn_sub_norm = rd.floats(p + "self_attn.attn_sub_norm.weight", {qd});
      L.ffn_sub_norm = rd.floats(p + "mlp.ffn_sub_norm.weight", {I});
    }
    if (c.qk_norm) {
      L.q_norm = rd.floats(p + "self_attn.q_norm.weight", {c.head_dim});
      L.k_norm = rd.floats(p + "self_attn.k_norm.weight", {c.head_dim});
    }
    L.qkv = linear(p + "qkv", qd + 2 * kvd, H);
    L.o = linear(p + "o", H, qd);
    L.gate_up = linear(p + "gate_up", 2 * I, H);
    L.down = linear(p + "down", H, I);
    if (opts.progress) opts.progress(l + 1, c.num_layers);
  }
  std::vector<float> final_norm = rd.floats("model.norm.weight", {H});
  std::unique_ptr<Linear> head;
  const json& hj = get("lm_head");
  const std::string hkind = hj.is_object() && hj.contains("kind") && hj["kind"].is_string() ? hj["kind"].get<std::string>() : "";
  const bool keep_stored = opts.lm_head.empty() || opts.lm_head == "auto";
  if (hkind == "tied") {
    const std::string kind = resolve_lm_head_kind(opts.lm_head, embed.is_bf16());
    if (kind == "f32" && embed.is_bf16()) {
      // A float32 head tied to the embedding: both read one float32 table.
      const Embedding widened = Embedding::f32(embed.f32_table(), V, H);
      release_mapped_pages(embed.bf16_data(), embed.bytes());
      embed = widened;
    }
    head = make_head_from_table(embed, kind);
  } else if (hkind == "float") {
    const TensorView* ht = ws.find("lm_head.weight");
    const bool bf16 = ht && ht->dtype == DType::BF16;
    const std::string kind = resolve_lm_head_kind(opts.lm_head, bf16);
    if (kind == "bf16" && bf16)
      head = std::make_unique<Bf16Linear>(reinterpret_cast<const uint16_t*>(rd.tensor(ht->name, DType::BF16, {V, H}).data), V, H);
    else if (kind == "bf16" || kind == "f32")
      head = make_head_linear(rd.floats("lm_head.weight", {V, H}), V, H, kind);
    else
      head = make_head_from_table(bf16 ? Embedding::bf16(reinterpret_cast<const uint16_t*>(ht->data), V, H)
                                       : Embedding::f32(std::make_shared<const std::vector<float>>(
                                                            rd.floats("lm_head.weight", {V, H})), V, H),
                                  kind);
  } else {
    head = linear("lm_head", V, H);
    if (!keep_stored && opts.lm_head != hkind)
      fail("{}: --lm-head {}: this model's head is stored as {} (convert the original model instead)", file,
           opts.lm_head, hkind);
  }
  auto model = std::make_unique<Transformer>(std::move(c), std::move(embed), std::move(layers), std::move(final_norm),
                                             std::move(head));
  model->set_keep_alive(std::move(wsp));
  return model;
}

}  // namespace

std::unique_ptr<Transformer> load_tritium_model(ModelConfig c, std::shared_ptr<const WeightStore> wsp,
                                                const LoadOptions& opts) {
  const std::string file = wsp->files().front()->path();
  // Fields are checked where they are read, with messages that name the linear or the key; a value of the wrong
  // JSON type that no check covers still ends as a tritium::Error naming the file, never as a json exception.
  try {
    return load_checked(std::move(c), std::move(wsp), opts);
  } catch (const json::exception& e) {
    fail("{}: tritium model: malformed layout: {}", file, e.what());
  }
}

}  // namespace tritium
