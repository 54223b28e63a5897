// tritium perplexity: perplexity of a model on a text file: llama.cpp-convention chunks (default) or
// lm-evaluation-harness rolling windows (--mode rolling); optional KL divergence against a saved base run.
#include <fmt/format.h>

#include <chrono>
#include <optional>

#include "cli/commands.h"
#include "cli/common.h"
#include "core/error.h"
#include "core/mapped_file.h"
#include "eval/kl_divergence.h"
#include "eval/perplexity.h"
#include "eval/rolling_perplexity.h"
#include "eval/text_file.h"
#include "engine/engine.h"

namespace tritium::cli {
namespace {

struct PplArgs {
  ModelOptions model;
  std::string file;
  int ctx = 512;
  bool ctx_given = false;
  CLI::Option* ctx_option = nullptr;
  int chunks = 0;
  std::string mode = "llama";
  std::string save_logits;
  std::string kl_base;
  int batch_tokens = 1024;
  std::string kv_dtype = "auto";
  float kv_scale = 0;
};

void print_kld(const KldResult& k) {
  fmt::print("KL divergence over {} positions (base file vs this model):\n", k.n);
  fmt::print("  PPL(base)              = {:.4f}\n", k.ppl_base);
  fmt::print("  PPL(this)              = {:.4f}\n", k.ppl);
  fmt::print("  dPPL = PPL - PPL(base) = {:+.4f}\n", k.dppl);
  fmt::print("  Mean ln(PPL/PPL(base)) = {:+.6f} ± {:.6f}\n", k.mean_ln_ppl_ratio, k.ln_ppl_ratio_stderr);
  fmt::print("  Mean KLD               = {:.6f} ± {:.6f}\n", k.mean_kld, k.kld_stderr);
  fmt::print("  Median / 99% / max KLD = {:.6f} / {:.6f} / {:.6f}\n", k.median_kld, k.p99_kld, k.max_kld);
  fmt::print("  RMS dp                 = {:.4f} %\n", 100 * k.rms_dp);
  fmt::print("  Same top-1 token       = {:.3f} ± {:.3f} %\n", 100 * k.same_top1, 100 * k.same_top1_stderr);
}

int run(const PplArgs& a) {
  if (a.mode != "llama" && a.mode != "rolling") fail("perplexity: --mode must be llama or rolling, not '{}'", a.mode);
  if (!a.save_logits.empty() && !a.kl_base.empty())
    fail("perplexity: use --save-logits on the base model and --kl-divergence on the other, not both at once");
  LoadedModel lm = load_model(a.model);
  const std::string text = read_text_universal_newlines(a.file);
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<int32_t> tokens = lm.tokenizer->encode(text, false);
  const auto& c = lm.model().config();
  const KvDType kv_dtype = kv_dtype_for(a.kv_dtype);
  const float kv_scale = a.kv_scale > 0 ? a.kv_scale
      : calibrate_kv_scale(*lm.backend, kv_dtype, lm.tokenizer->encode(kv_calibration_text(), true));
  // Printed once the text is known to be long enough (errors come first on stderr).
  const std::string kv_line = fmt::format(
      "KV cache: {}, {} bytes/token{}\n", kv_dtype_name(kv_dtype),
      KvCacheSpec{c.num_layers, c.num_kv_heads, c.head_dim, 16, 1, kv_dtype}.bytes_per_token(),
      kv_dtype == KvDType::kFP8E4M3 || kv_dtype == KvDType::kI8 ? fmt::format(", scale {:.4g}", kv_scale) : "");
  std::optional<int32_t> bos = c.bos_token_id ? c.bos_token_id : lm.tokenizer->bos_id();

  LogitsRecorder recorder;
  std::unique_ptr<KldAccumulator> kld;
  if (!a.kl_base.empty()) kld = std::make_unique<KldAccumulator>(a.kl_base);
  auto on_scored = [&](std::span<const float> logits, int32_t target) {
    if (!a.save_logits.empty()) recorder.add(logits, target);
    if (kld) kld->add(logits, target);
  };
  const bool want_logits = !a.save_logits.empty() || kld;

  std::map<std::string, std::string> meta{{"mode", a.mode}, {"text", a.file}, {"model", lm.dir},
                                          {"tokens", std::to_string(tokens.size())}};
  if (a.mode == "llama") {
    PerplexityOptions po;
    po.n_ctx = a.ctx;
    po.max_chunks = a.chunks;
    po.kv_dtype = kv_dtype;
    po.kv_scale = kv_scale;
    if (bos) po.bos_id = *bos;
    else po.prepend_bos = false;
    if (want_logits) po.on_scored = on_scored;
    meta["ctx"] = std::to_string(a.ctx);
    meta["chunks"] = std::to_string(a.chunks);
    PerplexityResult r = compute_perplexity(*lm.backend, tokens, po, [&](int i, int n, double ppl) {
      if (i == 1)
        fmt::print(stderr, "{}perplexity: {} tokens, ctx {}, {} chunks, scoring positions {}..{} of each chunk\n",
                   kv_line, tokens.size(), a.ctx, n, a.ctx / 2, a.ctx - 2);
      fmt::print(stderr, "[{}/{}] {:.4f}\n", i, n, ppl);
    });
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    fmt::print("Final estimate: PPL = {:.4f} ({} chunks, {} scored tokens, {:.1f} s)\n", r.ppl, r.chunks,
               r.scored_tokens, s);
  } else {
    // lm-eval loglikelihood_rolling: max_length = the model context unless -c is given; prefix = BOS, else EOS.
    ScorerOptions so;
    so.max_length = a.ctx_given ? a.ctx : 0;
    so.batch_tokens = a.batch_tokens;
    so.kv_dtype = kv_dtype;
    so.kv_scale = kv_scale;
    LoglikelihoodScorer scorer(*lm.backend, so);
    std::optional<int32_t> prefix = bos ? bos : lm.tokenizer->eos_id();
    if (!prefix) fail("perplexity --mode rolling: the model has neither a BOS nor an EOS token for the prefix");
    meta["ctx"] = std::to_string(scorer.max_length());
    if (tokens.empty()) fail("perplexity: {} has no tokens", a.file);
    fmt::print(stderr, "{}rolling perplexity: {} tokens, windows of {} tokens, prefix token {}\n", kv_line,
               tokens.size(), scorer.max_length(), *prefix);
    ScoredLogitsFn sink;
    if (want_logits) sink = [&](size_t, size_t, std::span<const float> lg, int32_t t) { on_scored(lg, t); };
    const RollingPerplexityResult r = rolling_perplexity(scorer, tokens, text, *prefix,
        [](size_t d, size_t n) { fmt::print(stderr, "[{}/{}] windows\n", d, n); }, sink);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    fmt::print("Rolling loglikelihood = {:.4f} over {} tokens in {} windows of {} ({:.1f} s)\n", r.loglikelihood,
               r.tokens, r.windows, scorer.max_length(), s);
    fmt::print("token_perplexity = {:.4f}\nword_perplexity = {:.4f} ({} words)\nbyte_perplexity = {:.4f} ({} bytes)\n"
               "bits_per_byte = {:.4f}\n",
               r.token_perplexity, r.word_perplexity, r.words, r.byte_perplexity, r.bytes, r.bits_per_byte);
  }
  if (!a.save_logits.empty()) {
    recorder.save(a.save_logits, meta);
    fmt::print(stderr, "saved base log-probs of {} positions to {}\n", recorder.count(), a.save_logits);
  }
  if (kld) print_kld(kld->finish());
  return 0;
}

}  // namespace

TRITIUM_REGISTER_COMMAND([](CLI::App& app) {
  auto a = std::make_shared<PplArgs>();
  CLI::App* sub = app.add_subcommand("perplexity", "Perplexity on a text file (llama.cpp convention or lm-eval "
                                     "rolling windows), KL divergence against a base model");
  add_model_options(sub, a->model);
  sub->add_option("-f,--file", a->file, "text file")->required();
  CLI::Option* ctx = sub->add_option("-c,--ctx", a->ctx, "context size per chunk (rolling: window size, default the "
                                     "model context)")->check(CLI::Range(4, 1 << 20));
  sub->add_option("--chunks", a->chunks, "maximum number of chunks (0 = all; llama mode)")->check(CLI::Range(0, 1 << 30));
  sub->add_option("--mode", a->mode, "llama (llama-perplexity chunks, default) or rolling (lm-eval "
                  "loglikelihood_rolling: word/byte perplexity, bits per byte)");
  sub->add_option("--save-logits", a->save_logits, "save the base model's log-probs of the scored positions "
                  "(safetensors) for a later --kl-divergence run");
  sub->add_option("--kl-divergence", a->kl_base, "compare with a --save-logits file: mean KLD, dPPL, same top-1");
  sub->add_option("--kv-cache-dtype", a->kv_dtype,
                  "KV cache dtype: auto (= f32, exact), f32, f16, bf16, fp8, int8");
  sub->add_option("--kv-cache-scale", a->kv_scale, "fp8/int8 per-tensor KV scale (default: calibrated)");
  sub->add_option("--batch-tokens", a->batch_tokens, "tokens per forward call (rolling mode)")
      ->check(CLI::Range(1, 1 << 20));
  a->ctx_option = ctx;
  runners()[sub] = [a] {
    a->ctx_given = a->ctx_option->count() > 0;
    return run(*a);
  };
});

}  // namespace tritium::cli
