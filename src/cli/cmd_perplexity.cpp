// tritium perplexity: llama.cpp-convention perplexity of a model on a text file.
#include <fmt/format.h>

#include <chrono>

#include "cli/commands.h"
#include "cli/common.h"
#include "core/error.h"
#include "core/mapped_file.h"
#include "eval/perplexity.h"
#include "eval/text_file.h"
#include "runtime/engine.h"

namespace tritium::cli {
namespace {

struct PplArgs {
  ModelOptions model;
  std::string file;
  int ctx = 512;
  int chunks = 0;
  std::string kv_dtype = "f32";
  float kv_scale = 0;
};

int run(const PplArgs& a) {
  LoadedModel lm = load_model(a.model);
  const std::string text = read_text_universal_newlines(a.file);
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<int32_t> tokens = lm.tokenizer->encode(text, false);
  PerplexityOptions po;
  po.n_ctx = a.ctx;
  po.max_chunks = a.chunks;
  po.kv_dtype = parse_kv_dtype(a.kv_dtype);
  po.kv_scale = a.kv_scale > 0 ? a.kv_scale
                               : calibrate_kv_scale(*lm.model, po.kv_dtype, lm.tokenizer->encode(kv_calibration_text(), true));
  fmt::print(stderr, "KV cache: {}, {} bytes/token{}\n", kv_dtype_name(po.kv_dtype),
             KvCacheSpec{lm.model->config().num_layers, lm.model->config().num_kv_heads, lm.model->config().head_dim, 16, 1, po.kv_dtype}.bytes_per_token(),
             po.kv_dtype == KvDType::kFP8E4M3 || po.kv_dtype == KvDType::kI8 ? fmt::format(", scale {:.4g}", po.kv_scale) : "");
  const auto& c = lm.model->config();
  if (c.bos_token_id) po.bos_id = *c.bos_token_id;
  else if (lm.tokenizer->bos_id()) po.bos_id = *lm.tokenizer->bos_id();
  else po.prepend_bos = false;
  PerplexityResult r = compute_perplexity(*lm.model, tokens, po, [&](int i, int n, double ppl) {
    if (i == 1)
      fmt::print(stderr, "perplexity: {} tokens, ctx {}, {} chunks, scoring positions {}..{} of each chunk\n",
                 tokens.size(), a.ctx, n, a.ctx / 2, a.ctx - 2);
    fmt::print(stderr, "[{}/{}] {:.4f}\n", i, n, ppl);
  });
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  fmt::print("Final estimate: PPL = {:.4f} ({} chunks, {} scored tokens, {:.1f} s)\n", r.ppl, r.chunks,
             r.scored_tokens, s);
  return 0;
}

}  // namespace

TRITIUM_REGISTER_COMMAND([](CLI::App& app) {
  auto a = std::make_shared<PplArgs>();
  CLI::App* sub = app.add_subcommand("perplexity", "Perplexity on a text file (llama.cpp convention)");
  add_model_options(sub, a->model);
  sub->add_option("-f,--file", a->file, "text file")->required();
  sub->add_option("-c,--ctx", a->ctx, "context size per chunk")->check(CLI::Range(4, 1 << 20));
  sub->add_option("--chunks", a->chunks, "maximum number of chunks (0 = all)")->check(CLI::Range(0, 1 << 30));
  sub->add_option("--kv-cache-dtype", a->kv_dtype, "KV cache dtype: f32, f16, bf16, fp8, int8");
  sub->add_option("--kv-cache-scale", a->kv_scale, "fp8/int8 per-tensor KV scale (default: calibrated)");
  runners()[sub] = [a] { return run(*a); };
});

}  // namespace tritium::cli
