#include "model/source_gguf.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>

#include "core/error.h"
#include "formats/gguf_quants.h"
#include "formats/ternary_format.h"
#include "model/weight_source.h"
#include "quant/ternary_detect.h"

namespace tritium {

std::string gguf_tensor_name(const std::string& hf) {
  static const std::pair<const char*, const char*> kTop[] = {
      {"model.embed_tokens.weight", "token_embd.weight"},
      {"model.norm.weight", "output_norm.weight"},
      {"lm_head.weight", "output.weight"},
  };
  for (const auto& [h, g] : kTop)
    if (hf == h) return g;
  static const std::pair<const char*, const char*> kLayer[] = {
      {"input_layernorm", "attn_norm"},       {"post_attention_layernorm", "ffn_norm"},
      {"self_attn.q_proj", "attn_q"},         {"self_attn.k_proj", "attn_k"},
      {"self_attn.v_proj", "attn_v"},         {"self_attn.o_proj", "attn_output"},
      {"self_attn.attn_sub_norm", "attn_sub_norm"}, {"mlp.gate_proj", "ffn_gate"},
      {"mlp.up_proj", "ffn_up"},              {"mlp.down_proj", "ffn_down"},
      {"mlp.ffn_sub_norm", "ffn_sub_norm"},    {"self_attn.q_norm", "attn_q_norm"},
      {"self_attn.k_norm", "attn_k_norm"},
  };
  const std::string pre = "model.layers.";
  if (hf.rfind(pre, 0) == 0) {
    const size_t dot = hf.find('.', pre.size());
    const size_t last = hf.rfind('.');
    if (dot != std::string::npos && last > dot) {
      const std::string layer = hf.substr(pre.size(), dot - pre.size());
      const std::string mid = hf.substr(dot + 1, last - dot - 1), leaf = hf.substr(last + 1);
      for (const auto& [h, g] : kLayer)
        if (mid == h) return fmt::format("blk.{}.{}.{}", layer, g, leaf);
    }
  }
  fail("no GGUF tensor corresponds to '{}'", hf);
}

namespace {

// Undoes llama.cpp's permute() of llama q/k rows: within each head of d rows, Hugging Face row h * d/2 + i (half h,
// i < d/2) was written as row 2 i + h.
void unpermute_heads(std::vector<float>& w, int64_t rows, int64_t cols, int heads) {
  const int64_t d = rows / heads;
  std::vector<float> out(w.size());
  for (int64_t hd = 0; hd < heads; ++hd)
    for (int64_t half = 0; half < 2; ++half)
      for (int64_t i = 0; i < d / 2; ++i) {
        const float* src = &w[static_cast<size_t>((hd * d + 2 * i + half) * cols)];
        std::copy(src, src + cols, &out[static_cast<size_t>((hd * d + half * d / 2 + i) * cols)]);
      }
  w = std::move(out);
}

class GgufSourceImpl final : public GgufSource {
 public:
  GgufSourceImpl(const GgufFile& f, const ModelConfig& c) : f_(f), llama_(c.arch == Arch::kLlama), heads_(c.num_heads),
                                                         kv_heads_(c.num_kv_heads) {}

  bool has(const std::string& name) const override { return f_.find_tensor(gguf_tensor_name(name)) != nullptr; }

  std::vector<float> vec(const std::string& name, int64_t n) const override {
    const GgufTensorInfo& t = get(name, {n});
    std::vector<float> v = gguf_tensor_to_f32(t, f_.path());
    fix_rope_rows(name, v, n, 1);
    return v;
  }

  std::vector<float> mat(const std::string& name, int64_t rows, int64_t cols) const override {
    const GgufTensorInfo& t = get(name, {cols, rows});
    std::vector<float> v = gguf_tensor_to_f32(t, f_.path());
    if (t.type == static_cast<uint32_t>(GgmlType::kQ2_0)) note_q2_0_storage(t, v, rows, cols);
    release_mapped_pages(t.data, t.nbytes);  // decoded: the model holds its own copy, the file's bytes need not stay resident
    fix_rope_rows(name, v, rows, cols);
    return v;
  }

  std::optional<TernaryQuant> stored_ternary(const std::string& name, int64_t rows, int64_t cols) const override {
    const GgufTensorInfo* ti = f_.find_tensor(gguf_tensor_name(name));
    if (!ti || ti->type != static_cast<uint32_t>(GgmlType::kQ2_0)) return std::nullopt;
    if (llama_ && (name.find(".self_attn.q_proj.") != std::string::npos ||
                   name.find(".self_attn.k_proj.") != std::string::npos))
      return std::nullopt;  // rows permuted by llama.cpp's converter: mat() undoes that
    const GgufTensorInfo& t = get(name, {cols, rows});
    std::optional<TernaryQuant> q = q2_0_ternary(t, rows, cols);
    if (q) release_mapped_pages(t.data, t.nbytes);
    return q;
  }

  /// A Q2_0 table (embedding, head) stays in its blocks, decoded a row at a time; other types as float32.
  Embedding table(const std::string& name, int64_t rows, int64_t cols) const override {
    const GgufTensorInfo& t = get(name, {cols, rows});
    if (t.type != static_cast<uint32_t>(GgmlType::kQ2_0)) return WeightSource::table(name, rows, cols);
    return Embedding::q2_0(t.data, rows, cols, t.block, t.block_bytes, f_.mapping());
  }

  TernaryWeight ternary(const std::string& prefix, int64_t out, int64_t in) const override {
    TernaryWeight r = ternary_values(prefix, out, in);
    // An optional one-value tensor <name>.scale multiplies the projection's output (llama.cpp's wq_scale etc.).
    const std::string scale_name = gguf_tensor_name(prefix + ".scale");
    if (const GgufTensorInfo* st = f_.find_tensor(scale_name)) {
      used_.insert(scale_name);
      const std::vector<float> v = gguf_tensor_to_f32(*st, f_.path());
      if (v.size() != 1 || !std::isfinite(v[0]))
        fail("{}: tensor '{}' must hold one finite value, has ne {}", f_.path(), scale_name, st->ne_str());
      r.scale *= v[0];
      for (float& g : r.group_scales) g *= v[0];
    }
    return r;
  }

  /// Tensors of the file that no getter asked for.
  std::vector<std::string> unused() const override {
    std::vector<std::string> out;
    for (const GgufTensorInfo& t : f_.tensors())
      if (!used_.count(t.name)) out.push_back(t.name);
    return out;
  }

 private:
  TernaryWeight ternary_values(const std::string& prefix, int64_t out, int64_t in) const {
    const GgufTensorInfo& t = get(prefix + ".weight", {in, out});
    TernaryWeight r;
    if (!gguf_type_is_ternary(t.type)) return from_float(gguf_tensor_to_f32(t, f_.path()));
    GgufTernary g = gguf_tensor_to_ternary(t, f_.path());
    release_mapped_pages(t.data, t.nbytes);
    r.w = std::move(g.values);
    // One scale when every block that holds a non-zero weight has the same one (the BitNet case: upstream's d is the
    // block's max |w|, which is the tensor scale); else a scale per row and group of 128 (TQ blocks are 256 weights
    // of one row, since ne[0] is a multiple of 256).
    std::optional<float> uniform;
    bool mixed = false;
    for (size_t b = 0; b < g.scales.size() && !mixed; ++b) {
      const int8_t* v = r.w.data() + b * static_cast<size_t>(g.block);
      if (std::all_of(v, v + g.block, [](int8_t x) { return x == 0; })) continue;
      if (!uniform) uniform = g.scales[b];
      mixed = g.scales[b] != *uniform;
    }
    r.scale = uniform.value_or(1.0f);
    if (mixed && g.block < kTernaryGroupK) {
      // 64-weight Q2_0 blocks: the two halves of a group of 128 must share their scale (or be all zero).
      const int64_t per = kTernaryGroupK / g.block;
      for (size_t b0 = 0; b0 < g.scales.size(); b0 += static_cast<size_t>(per)) {
        std::optional<float> s;
        for (size_t b = b0; b < b0 + static_cast<size_t>(per) && b < g.scales.size(); ++b) {
          const int8_t* v = r.w.data() + b * static_cast<size_t>(g.block);
          if (std::all_of(v, v + g.block, [](int8_t x) { return x == 0; })) continue;
          if (s && *s != g.scales[b])
            fail("{}: tensor '{}' (Q2_0): 64-weight blocks {} and {} of one group of 128 inputs have different scales "
                 "({} and {}); tritium's ternary formats hold one scale per group of 128",
                 f_.path(), t.name, b0, b, *s, g.scales[b]);
          s = g.scales[b];
        }
      }
    }
    if (mixed) {
      const int64_t groups = (in + kTernaryGroupK - 1) / kTernaryGroupK;
      r.group_scales.resize(static_cast<size_t>(out * groups));
      for (size_t i = 0; i < r.group_scales.size(); ++i) {
        const int64_t row = static_cast<int64_t>(i) / groups, col = static_cast<int64_t>(i) % groups * kTernaryGroupK;
        // The scale of a block of the group that holds a non-zero weight (64-weight blocks: the check above
        // makes them agree; an all-zero block's scale multiplies only zeros).
        const int64_t first = (row * in + col) / g.block, last = (row * in + std::min(in, col + kTernaryGroupK) - 1) / g.block;
        float sc = g.scales[static_cast<size_t>(first)];
        for (int64_t b = first; b <= last; ++b) {
          const int8_t* v = r.w.data() + b * g.block;
          if (std::any_of(v, v + g.block, [](int8_t x) { return x != 0; })) sc = g.scales[static_cast<size_t>(b)];
        }
        r.group_scales[i] = sc;
      }
    }
    return r;
  }

  // Q2_0 codes and block scales as detect_ternary (groups of 128) would find them in the decoded float32 values
  // (code - 1) * d, decided a block at a time: a non-zero value has magnitude |d| and the sign of (code - 1) * d;
  // the magnitudes of a group of 128 must agree; nullopt where detection would fail (a non-finite d, the code 3).
  static std::optional<TernaryQuant> q2_0_ternary(const GgufTensorInfo& t, int64_t rows, int64_t cols) {
    const int64_t n = rows * cols, block = t.block, G = (cols + kTernaryGroupK - 1) / kTernaryGroupK;
    TernaryQuant q;
    q.n = rows;
    q.k = cols;
    q.group_size = kTernaryGroupK;
    q.q.resize(static_cast<size_t>(n));
    q.scales.assign(static_cast<size_t>(rows * G), 0.0f);
    std::vector<float> d(static_cast<size_t>(n / block));
    decode_q2_0(t.data, n, block, q.q.data(), d.data());
    const int64_t per_row = cols / block;  // blocks of a row (cols is a multiple of block)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t g = 0; g < G; ++g) {
        float mag = 0.0f;
        const int64_t b0 = g * kTernaryGroupK / block, b1 = std::min(per_row, (g + 1) * kTernaryGroupK / block);
        for (int64_t b = b0; b < b1; ++b) {
          const float db = d[static_cast<size_t>(r * per_row + b)];
          int8_t* code = q.q.data() + r * cols + b * block;
          if (!std::isfinite(db)) return std::nullopt;  // every (code - 1) * d is then inf or NaN
          if (db == 0.0f) {
            std::fill(code, code + block, int8_t{0});
            continue;
          }
          bool any = false;
          for (int64_t j = 0; j < block; ++j) {
            if (code[j] == 2) return std::nullopt;  // +2 d: not ternary (mat() says so and keeps float32)
            any = any || code[j] != 0;
          }
          if (!any) continue;
          const float a = std::fabs(db);
          if (mag == 0.0f) mag = a;
          else if (a != mag) return std::nullopt;
          if (db < 0)
            for (int64_t j = 0; j < block; ++j) code[j] = static_cast<int8_t>(-code[j]);
        }
        q.scales[static_cast<size_t>(r * G + g)] = mag;
      }
    return settle_group_scales(std::move(q));
  }

  // A Q2_0 projection is held packed ternary with its scales when its values are ternary times one scale per row and
  // group of 128 inputs (projections.cpp's detection); one line says when it cannot be (code 3 = +2 d, or 64-weight blocks
  // whose scales differ within a group of 128), and it is then computed in float32, exactly.
  void note_q2_0_storage(const GgufTensorInfo& t, const std::vector<float>& v, int64_t rows, int64_t cols) const {
    const GgufTernary g = [&] {
      GgufTernary r;
      r.block = t.block;
      r.values.resize(v.size());
      r.scales.resize(v.size() / static_cast<size_t>(t.block));
      decode_q2_0(t.data, t.numel(), t.block, r.values.data(), r.scales.data());
      return r;
    }();
    const char* why = nullptr;
    for (size_t b = 0; b < g.scales.size() && !why; ++b)
      for (int64_t i = 0; i < g.block; ++i)
        if (g.values[b * static_cast<size_t>(g.block) + static_cast<size_t>(i)] == 2 && g.scales[b] != 0.0f) {
          why = "uses the 2-bit code 3 (+2 d), which no ternary format holds";
          break;
        }
    if (!why && t.block < kTernaryGroupK && !detect_ternary(v.data(), rows, cols, kTernaryGroupK))
      why = "has 64-weight blocks whose scales differ within a group of 128 inputs";
    if (why)
      fmt::print(stderr, "note: {}: tensor '{}' (Q2_0) {}: computed in float32 (exact, {} bytes instead of {})\n",
                 f_.path(), t.name, why, v.size() * 4, t.nbytes);
  }

  // The tensor behind a Hugging Face name, with ne checked (GGUF order: the Hugging Face shape reversed).
  const GgufTensorInfo& get(const std::string& hf, const std::vector<int64_t>& ne) const {
    const std::string name = gguf_tensor_name(hf);
    const GgufTensorInfo& t = f_.tensor(name);
    used_.insert(name);
    if (t.ne != ne) {
      GgufTensorInfo want;
      want.ne = ne;
      fail("{}: tensor '{}' has ne {}, expected {} (GGUF order: in, out)", f_.path(), name, t.ne_str(), want.ne_str());
    }
    return t;
  }

  // Ternary x one magnitude m (bitnet.cpp / llama.cpp F16 and F32 BitNet files): exact; else BitNet's absmean rule.
  static TernaryWeight from_float(const std::vector<float>& f) {
    float m = 0;
    for (float v : f) {
      if (v == 0.0f) continue;
      if (m == 0.0f) m = std::fabs(v);
      if (std::fabs(v) != m) return ternary_absmean_b158(f);
    }
    TernaryWeight r;
    r.w.resize(f.size());
    for (size_t i = 0; i < f.size(); ++i) r.w[i] = static_cast<int8_t>(f[i] > 0 ? 1 : f[i] < 0 ? -1 : 0);
    r.scale = m == 0.0f ? 1.0f : m;
    return r;
  }

  void fix_rope_rows(const std::string& hf, std::vector<float>& v, int64_t rows, int64_t cols) const {
    if (!llama_) return;
    if (hf.find(".self_attn.q_proj.") != std::string::npos) unpermute_heads(v, rows, cols, heads_);
    else if (hf.find(".self_attn.k_proj.") != std::string::npos) unpermute_heads(v, rows, cols, kv_heads_);
  }

  const GgufFile& f_;
  bool llama_;
  int heads_, kv_heads_;
  mutable std::set<std::string> used_;
};

}  // namespace

std::unique_ptr<GgufSource> GgufSource::open(const GgufFile& f, const ModelConfig& c) {
  return std::make_unique<GgufSourceImpl>(f, c);
}

}  // namespace tritium
