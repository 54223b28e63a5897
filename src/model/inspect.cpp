#include "model/inspect.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"
#include "core/mapped_file.h"
#include "formats/gguf_quants.h"

namespace tritium {
namespace {

void add_linear(ModelInspection& r, const Linear& lin, const std::string& layer_prefix, const char* proj) {
  const auto* t = dynamic_cast<const TernaryLinear*>(&lin);
  const int64_t N = lin.out_features(), K = lin.in_features();
  std::vector<std::string> names;
  const std::string p = layer_prefix;
  const std::string sp = std::string(proj);
  if (sp == "qkv") names = {p + "self_attn.q_proj", p + "self_attn.k_proj", p + "self_attn.v_proj"};
  else if (sp == "o") names = {p + "self_attn.o_proj"};
  else if (sp == "gate_up") names = {p + "mlp.gate_proj", p + "mlp.up_proj"};
  else if (sp == "down") names = {p + "mlp.down_proj"};
  else names = {sp};
  if (!t) {
    InspectedTensor it;
    it.name = names.size() == 1 ? names[0] : p + sp;
    it.storage = lin.format_name();
    it.rows = N;
    it.cols = K;
    it.bytes = lin.weight_bytes();
    r.tensors.push_back(std::move(it));
    return;
  }
  std::vector<int8_t> w(static_cast<size_t>(N * K));
  t->packed().unpack(w.data());
  // Row ranges: the segments when they match the original tensors, else the whole layer.
  std::vector<int64_t> rows;
  if (!t->has_group_scales() && t->segments().size() == names.size())
    for (const auto& s : t->segments()) rows.push_back(s.rows);
  else {
    rows = {N};
    if (names.size() != 1) names = {p + sp};
  }
  const int64_t G = t->packed().groups();
  int64_t r0 = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    InspectedTensor it;
    it.name = names[i];
    it.storage = lin.format_name();
    it.rows = rows[i];
    it.cols = K;
    it.ternary = true;
    it.scales = !t->has_group_scales() ? 1 : static_cast<uint64_t>(rows[i] * G);
    it.stats = ternary_tensor_stats(w.data() + r0 * K, rows[i], K, 2 * it.scales);
    it.bytes = static_cast<uint64_t>(static_cast<double>(lin.weight_bytes()) * static_cast<double>(rows[i]) /
                                     static_cast<double>(N));
    r.ternary_weights += it.stats.count;
    r.ternary_zeros += it.stats.zeros;
    r.ternary_scales += it.scales;
    if (r.ternary_totals.empty()) {
      r.ternary_totals = it.stats.formats;
      for (auto& f : r.ternary_totals) f.bytes = 0;
    }
    for (size_t f = 0; f < it.stats.formats.size(); ++f) r.ternary_totals[f].bytes += it.stats.formats[f].bytes;
    r.tensors.push_back(std::move(it));
    r0 += rows[i];
  }
}

}  // namespace

ModelInspection inspect_model(const Transformer& model) {
  ModelInspection r;
  const char* proj[4] = {"qkv", "o", "gate_up", "down"};
  for (size_t l = 0; l < model.layers().size(); ++l) {
    const LayerWeights& L = model.layers()[l];
    const Linear* lins[4] = {L.qkv.get(), L.o.get(), L.gate_up.get(), L.down.get()};
    for (int i = 0; i < 4; ++i) add_linear(r, *lins[i], fmt::format("model.layers.{}.", l), proj[i]);
  }
  add_linear(r, model.lm_head(), "", "lm_head");
  r.weight_bytes = model.weight_bytes();
  if (r.ternary_weights > 0) {
    const double n = static_cast<double>(r.ternary_weights);
    const double scale_bytes = 2.0 * static_cast<double>(r.ternary_scales);
    for (auto& f : r.ternary_totals) {
      f.bits_with_overhead = 8.0 * static_cast<double>(f.bytes) / n;
      f.bits_with_scales = 8.0 * (static_cast<double>(f.bytes) + scale_bytes) / n;
    }
    BitcosSummary& s = r.summary;
    s.zero_density = static_cast<double>(r.ternary_zeros) / n;
    s.bitcos_symbols = 2.0 - s.zero_density;
    for (auto& f : r.ternary_totals) {
      if (f.format == TernaryFormat::kBitcos) f.bits_symbols = s.bitcos_symbols;
    }
    s.scale_bits = 8.0 * scale_bytes / n;
    s.bitcos_with_scale = s.bitcos_symbols + s.scale_bits;
    s.ratio_vs_2bit = (2.0 + s.scale_bits) / s.bitcos_with_scale;
    s.ratio_vs_5trit = (1.625 + s.scale_bits) / s.bitcos_with_scale;
  }
  return r;
}

std::vector<GgufInspectedTensor> inspect_gguf(const GgufFile& f, std::vector<GgufTypeTotal>* totals) {
  std::vector<GgufInspectedTensor> out;
  for (const GgufTensorInfo& t : f.tensors()) {
    GgufInspectedTensor e;
    e.name = t.name;
    // Q2_0's two layouts: "Q2_0/64" (mainline ggml) and "Q2_0/128" (PrismML).
    e.type = t.type == static_cast<uint32_t>(GgmlType::kQ2_0) ? fmt::format("Q2_0/{}", t.block)
                                                              : ggml_type_name(t.type);
    e.ne = t.ne;
    e.bytes = t.nbytes;
    const auto n = static_cast<uint64_t>(t.numel());
    e.bits_per_weight = n ? 8.0 * static_cast<double>(t.nbytes) / static_cast<double>(n) : 0;
    // A Q2_0 tensor that uses code 3 (+2 d) is not ternary; other ternary types with it are errors, as at load.
    const bool q2_code3 = t.type == static_cast<uint32_t>(GgmlType::kQ2_0) && [&] {
      std::vector<int8_t> v(static_cast<size_t>(n));
      std::vector<float> d(static_cast<size_t>(n) / static_cast<size_t>(t.block));
      decode_q2_0(t.data, t.numel(), t.block, v.data(), d.data());
      for (size_t i = 0; i < v.size(); ++i)
        if (v[i] == 2 && d[i / static_cast<size_t>(t.block)] != 0.0f) return true;
      return false;
    }();
    if (gguf_type_is_ternary(t.type) && !q2_code3) {
      const GgufTernary r = gguf_tensor_to_ternary(t, f.path());
      e.ternary = true;
      for (int8_t v : r.values) e.zeros += v == 0;
      e.zero_density = n ? static_cast<double>(e.zeros) / static_cast<double>(n) : 0;
    }
    release_mapped_pages(t.data, t.nbytes);  // counted: the file's bytes need not stay resident
    if (totals) {
      auto it = std::find_if(totals->begin(), totals->end(), [&](const GgufTypeTotal& x) { return x.type == e.type; });
      if (it == totals->end()) it = totals->insert(totals->end(), GgufTypeTotal{e.type});
      ++it->tensors;
      it->weights += n;
      it->bytes += t.nbytes;
    }
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace tritium
