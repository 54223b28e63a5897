// tritium convert: writes a tritium model (src/model/tritium_model.h) from a Hugging Face folder: BitNet weights
// packed in a chosen ternary format, or a 16/32-bit model post-training quantized, optionally with a quantized
// lm_head; the result loads with no repacking and no re-quantization.
#include <fmt/format.h>

#include <chrono>
#include <filesystem>

#include "cli/commands.h"
#include "cli/common.h"
#include "core/error.h"
#include "core/parallel.h"
#include "model/tritium_model.h"

namespace tritium::cli {
namespace {

struct ConvertArgs {
  ModelOptions model;
  std::string out;
  bool quiet = false;
};

void progress_bar(const char* what, int done, int total) {
  const int width = 30;
  const int fill = total > 0 ? done * width / total : width;
  fmt::print(stderr, "\r{:<9} [{:<{}}] {}/{}", what, std::string(static_cast<size_t>(fill), '#'), width, done, total);
  if (done == total) fmt::print(stderr, "\n");
}

int run(const ConvertArgs& a) {
  const auto t0 = std::chrono::steady_clock::now();
  ModelOptions mo = a.model;
  set_num_threads(mo.threads);
  const std::string dir = resolve_model_dir(mo.model_dir);
  LoadOptions lo = make_load_options(mo);
  lo.lm_head = mo.lm_head;  // "" keeps the head as stored (tied stays tied), not the CPU's run-time default
  if (!a.quiet) lo.progress = [](int d, int t) { progress_bar("quantize", d, t); };
  std::unique_ptr<Transformer> model = load_transformer(dir, lo);
  TritiumWriteInfo info;
  info.source = std::filesystem::weakly_canonical(dir).string();
  info.weights = model->config().bitnet_quant ? std::string(ternary_format_name(lo.ternary_format)) : "";
  info.quant = lo.quant;
  info.lm_head = model->lm_head().format_name();
  std::function<void(int, int)> wp;
  if (!a.quiet) wp = [](int d, int t) { progress_bar("write", d, t); };
  write_tritium_model(*model, dir, a.out, info, wp);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const auto bytes = std::filesystem::file_size(std::filesystem::path(a.out) / "model.safetensors");
  fmt::print("wrote {} ({}{}{}lm_head {}; model.safetensors {:.2f} MiB) in {:.1f} s\n", a.out,
             info.weights.empty() ? "" : "weights " + info.weights + ", ",
             info.quant.empty() ? "" : "quant " + info.quant + ", ", "", info.lm_head,
             static_cast<double>(bytes) / (1 << 20), s);
  return 0;
}

}  // namespace

TRITIUM_REGISTER_COMMAND([](CLI::App& app) {
  auto a = std::make_shared<ConvertArgs>();
  CLI::App* sub = app.add_subcommand(
      "convert", "Write a tritium model: ternary weights packed (--weights), a 16/32-bit model quantized (--quant), "
                 "the lm_head quantized (--lm-head)");
  add_model_options(sub, a->model);
  sub->add_option("-o,--output", a->out, "output folder")->required();
  sub->add_flag("-q,--quiet", a->quiet, "no progress bar");
  runners()[sub] = [a] { return run(*a); };
});

}  // namespace tritium::cli
