// tritium inspect: per-tensor zero density and bits/weight of every ternary storage format, totals, and the
// BITCOS paper's Table I row for a model (Hugging Face folder, tritium model or GGUF file; for GGUF also the file's
// metadata and its tensors as stored: ggml type, bits/weight, zero density of the ternary ones).
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <optional>

#include "cli/commands.h"
#include "cli/common.h"
#include "core/error.h"
#include "core/parallel.h"
#include "io/safetensors.h"
#include "model/gguf_config.h"
#include "model/inspect.h"
#include "model/tritium_model.h"

namespace tritium::cli {
namespace {

struct InspectArgs {
  std::string model;
  bool json = false;
  int threads = 0;
};

nlohmann::json bits_json(const std::vector<TernaryFormatBits>& fs) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& f : fs)
    j[std::string(ternary_format_name(f.format))] = {{"bytes", f.bytes},
                                                     {"bits_symbols", f.bits_symbols},
                                                     {"bits_with_overhead", f.bits_with_overhead},
                                                     {"bits_with_scales", f.bits_with_scales}};
  return j;
}

nlohmann::json gguf_json(const GgufFile& f, const std::vector<GgufInspectedTensor>& ts,
                         const std::vector<GgufTypeTotal>& totals) {
  nlohmann::json md = nlohmann::json::object();
  for (const auto& [k, v] : f.metadata()) md[k] = v.summary();
  nlohmann::json tj = nlohmann::json::array();
  for (const auto& t : ts) {
    nlohmann::json e = {{"name", t.name}, {"type", t.type}, {"ne", t.ne}, {"bytes", t.bytes},
                        {"bits_per_weight", t.bits_per_weight}};
    if (t.ternary) e["zero_density"] = t.zero_density;
    tj.push_back(e);
  }
  nlohmann::json ty = nlohmann::json::array();
  for (const auto& t : totals)
    ty.push_back({{"type", t.type}, {"tensors", t.tensors}, {"weights", t.weights}, {"bytes", t.bytes},
                  {"bits_per_weight", 8.0 * static_cast<double>(t.bytes) / static_cast<double>(t.weights)}});
  return {{"version", f.version()}, {"alignment", f.alignment()}, {"metadata", md}, {"tensors", tj}, {"types", ty}};
}

void print_gguf(const GgufFile& f, const std::vector<GgufInspectedTensor>& ts, const std::vector<GgufTypeTotal>& totals) {
  fmt::print("GGUF file: {} (version {}, alignment {}, {} metadata keys, {} tensors)\n", f.path(), f.version(),
             f.alignment(), f.metadata().size(), f.tensors().size());
  for (const auto& [k, v] : f.metadata()) fmt::print("  {} = {}\n", k, v.summary());
  fmt::print("\n| GGUF tensor | type | ne | bytes | bits/weight | z |\n| --- | --- | --- | ---: | ---: | ---: |\n");
  for (const auto& t : ts) {
    std::string ne;
    for (int64_t d : t.ne) ne += fmt::format("{}{}", ne.empty() ? "" : "x", d);
    fmt::print("| {} | {} | {} | {} | {:.3f} | {} |\n", t.name, t.type, ne, t.bytes, t.bits_per_weight,
               t.ternary ? fmt::format("{:.4f}", t.zero_density) : "-");
  }
  fmt::print("\n| type | tensors | weights | bytes | bits/weight |\n| --- | ---: | ---: | ---: | ---: |\n");
  for (const auto& t : totals)
    fmt::print("| {} | {} | {} | {} | {:.4f} |\n", t.type, t.tensors, t.weights, t.bytes,
               8.0 * static_cast<double>(t.bytes) / static_cast<double>(t.weights));
  fmt::print("\n");
}

int run(const InspectArgs& a) {
  set_num_threads(a.threads);
  const std::string dir = resolve_model_dir(a.model);
  std::optional<GgufFile> gguf;
  std::vector<GgufInspectedTensor> gguf_tensors;
  std::vector<GgufTypeTotal> gguf_totals;
  if (is_gguf_path(dir)) {
    gguf = GgufFile::open(dir);
    gguf_tensors = inspect_gguf(*gguf, &gguf_totals);
  }
  LoadOptions lo;
  // The storage the model runs with by default (2 bits per ternary weight: an int8 copy would be 4x the memory of
  // the run it describes); tritium models keep theirs.
  lo.ternary_format = auto_ternary_format();
  std::unique_ptr<Transformer> model = load_transformer(dir, lo);
  const bool tritium = !gguf && is_tritium_model(WeightStore(dir));
  const char* container = gguf ? "GGUF" : tritium ? "tritium" : "Hugging Face";
  const ModelInspection r = inspect_model(*model);
  const BitcosSummary& s = r.summary;
  if (a.json) {
    nlohmann::json j;
    j["model"] = dir;
    j["container"] = gguf ? "gguf" : tritium ? "tritium" : "huggingface";
    if (gguf) j["gguf"] = gguf_json(*gguf, gguf_tensors, gguf_totals);
    j["weight_bytes"] = r.weight_bytes;
    nlohmann::json ts = nlohmann::json::array();
    for (const auto& t : r.tensors) {
      nlohmann::json e = {{"name", t.name}, {"shape", {t.rows, t.cols}}, {"storage", t.storage}, {"bytes", t.bytes}};
      if (t.ternary) {
        e["zeros"] = t.stats.zeros;
        e["count"] = t.stats.count;
        e["zero_density"] = t.stats.zero_density;
        e["scales"] = t.scales;
        e["formats"] = bits_json(t.stats.formats);
      }
      ts.push_back(e);
    }
    j["tensors"] = ts;
    if (r.ternary_weights > 0) {
      j["ternary"] = {{"weights", r.ternary_weights}, {"zeros", r.ternary_zeros}, {"scales", r.ternary_scales},
                      {"zero_density", s.zero_density}, {"formats", bits_json(r.ternary_totals)}};
      j["bitcos_table1"] = {{"percent_zeros", 100.0 * s.zero_density}, {"bitcos_symbols", s.bitcos_symbols},
                            {"scale_bits", s.scale_bits},             {"bitcos_with_scale", s.bitcos_with_scale},
                            {"ratio_vs_2bit", s.ratio_vs_2bit},       {"ratio_vs_5trit", s.ratio_vs_5trit}};
    }
    fmt::print("{}\n", j.dump(2));
    return 0;
  }
  if (gguf) print_gguf(*gguf, gguf_tensors, gguf_totals);
  fmt::print("model: {} ({} container), weights in memory: {:.2f} MiB\n\n", dir, container,
             static_cast<double>(r.weight_bytes) / (1 << 20));
  fmt::print("bits/weight: symbols only (i2 2, tq1 1.6, bitcos 2 - z) / with index, padding and 16-bit scales\n");
  fmt::print("| tensor | shape | storage | z | i2 | tq1 | bitcos | bytes stored |\n");
  fmt::print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |\n");
  for (const auto& t : r.tensors) {
    if (!t.ternary) {
      fmt::print("| {} | {}x{} | {} | - | - | - | - | {} |\n", t.name, t.rows, t.cols, t.storage, t.bytes);
      continue;
    }
    const auto& i2 = t.stats.get(TernaryFormat::kI2);
    const auto& tq = t.stats.get(TernaryFormat::kTQ1);
    const auto& bc = t.stats.get(TernaryFormat::kBitcos);
    fmt::print("| {} | {}x{} | {} | {:.4f} | {:.3f} / {:.3f} | {:.3f} / {:.3f} | {:.3f} / {:.3f} | {} |\n", t.name, t.rows,
               t.cols, t.storage, t.stats.zero_density, i2.bits_symbols, i2.bits_with_scales, tq.bits_symbols,
               tq.bits_with_scales, bc.bits_symbols, bc.bits_with_scales, t.bytes);
  }
  if (r.ternary_weights == 0) {
    fmt::print("\nno ternary weights\n");
    return 0;
  }
  fmt::print("\nternary weights: {} zeros in {} weights, z = {:.4f}; {} scales\n", r.ternary_zeros, r.ternary_weights,
             s.zero_density, r.ternary_scales);
  fmt::print("| format | bytes | bits/weight symbols | + index/padding | + 16-bit scales |\n");
  fmt::print("| --- | ---: | ---: | ---: | ---: |\n");
  for (const auto& f : r.ternary_totals)
    fmt::print("| {} | {} | {:.4f} | {:.4f} | {:.4f} |\n", ternary_format_name(f.format), f.bytes, f.bits_symbols,
               f.bits_with_overhead, f.bits_with_scales);
  fmt::print("\nBITCOS Table I row (red. = size of the format with scales / BITCOS with scales; > 1: BITCOS smaller)\n");
  fmt::print("| % 0 | BITCOS symbols | + scale | red. vs 2-bit | red. vs 5-trit (1.625) |\n");
  fmt::print("| ---: | ---: | ---: | ---: | ---: |\n");
  fmt::print("| {:.2f} | {:.4f} | {:.4f} | {:.3f} | {:.3f} |\n", 100.0 * s.zero_density, s.bitcos_symbols,
             s.bitcos_with_scale, s.ratio_vs_2bit, s.ratio_vs_5trit);
  return 0;
}

}  // namespace

TRITIUM_REGISTER_COMMAND([](CLI::App& app) {
  auto a = std::make_shared<InspectArgs>();
  CLI::App* sub = app.add_subcommand("inspect", "Zero density and bits/weight per tensor and format (BITCOS Table I)");
  sub->add_option("model", a->model, "Hugging Face model folder, tritium model or GGUF file (default: bundled tiny-bitnet)");
  sub->add_flag("--json", a->json, "JSON output");
  sub->add_option("-t,--threads", a->threads, "CPU threads (default: all cores)");
  runners()[sub] = [a] { return run(*a); };
});

}  // namespace tritium::cli
