#include "model/projections.h"

#include <map>

#include "core/error.h"
#include "quant/int8_projection.h"
#include "quant/ternary_detect.h"
#include "quant/ternary_ptq.h"

namespace tritium {

namespace {

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
// inputs, as one TernaryLinear.
std::unique_ptr<TernaryLinear> fused_ternary(const std::vector<TernaryQuant>& qs, const std::vector<int64_t>& rows,
                                             int64_t in, const LoadOptions& o) {
  bool grouped = false;
  for (const TernaryQuant& q : qs) grouped = grouped || q.group_size != 0;
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

}  // namespace

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
      auto t = fused_ternary(qs, rows, in, o);
      for (const auto& [prefix, r] : parts)
        if (bias) {
          auto v = ws.vec(prefix + ".bias", r);
          b.insert(b.end(), v.begin(), v.end());
        }
      t->set_bias(std::move(b));
      return t;
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

}  // namespace tritium
