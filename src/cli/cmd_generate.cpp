// tritium generate: stream a completion of a prompt to stdout; figures on stderr.
#include <fmt/format.h>

#include <cstdio>

#include "cli/commands.h"
#include "cli/common.h"
#include "runtime/generator.h"

namespace tritium::cli {
namespace {

struct GenerateArgs {
  ModelOptions model;
  std::string prompt;
  int n = 128;
  float temp = 0.8f, top_p = 1.0f, min_p = 0.0f, repeat_penalty = 1.0f;
  int top_k = 40;
  int64_t seed = -1;
  std::vector<std::string> stop;
  bool ignore_eos = false;
  std::string kv_dtype = "f32";
};

int run(const GenerateArgs& a) {
  LoadedModel lm = load_model(a.model);
  Generator gen(*lm.model, *lm.tokenizer);
  GenerateOptions go;
  go.max_new_tokens = a.n;
  go.sampling.temperature = a.temp;
  go.sampling.top_k = a.top_k;
  go.sampling.top_p = a.top_p;
  go.sampling.min_p = a.min_p;
  go.sampling.repetition_penalty = a.repeat_penalty;
  if (a.seed >= 0) {
    go.sampling.seed = static_cast<uint64_t>(a.seed);
    go.sampling.has_seed = true;
  }
  go.stop = a.stop;
  go.ignore_eos = a.ignore_eos;
  go.kv_dtype = parse_kv_dtype(a.kv_dtype);
  const std::vector<int32_t> ids = gen.encode_prompt(a.prompt);
  std::fwrite(a.prompt.data(), 1, a.prompt.size(), stdout);
  std::fflush(stdout);
  GenerateStats st;
  gen.generate(ids, go, [](const std::string& s) {
    std::fwrite(s.data(), 1, s.size(), stdout);
    std::fflush(stdout);
  }, &st);
  std::fputc('\n', stdout);
  const double pf = st.prefill_seconds > 0 ? st.prompt_tokens / st.prefill_seconds : 0;
  const double dec = st.decode_seconds > 0 && st.generated_tokens > 1 ? (st.generated_tokens - 1) / st.decode_seconds : 0;
  fmt::print(stderr,
             "prompt tokens: {} | prefill: {:.1f} tok/s | decode: {:.1f} tok/s ({} tokens, {}) | peak RSS: {:.1f} MiB\n",
             st.prompt_tokens, pf, dec, st.generated_tokens, st.finish_reason, peak_rss_mib());
  return 0;
}

}  // namespace

TRITIUM_REGISTER_COMMAND([](CLI::App& app) {
  auto a = std::make_shared<GenerateArgs>();
  CLI::App* sub = app.add_subcommand("generate", "Generate text from a prompt (streams to stdout)");
  add_model_options(sub, a->model);
  sub->add_option("-p,--prompt", a->prompt, "prompt text")->required();
  sub->add_option("-n,--n-predict", a->n, "maximum new tokens")->check(CLI::Range(0, 1 << 20));
  sub->add_option("--temp", a->temp, "temperature (0 = greedy)")->check(CLI::Range(0.0, 100.0));
  sub->add_option("--top-k", a->top_k, "top-k (0 = off)")->check(CLI::Range(0, 1 << 30));
  sub->add_option("--top-p", a->top_p, "top-p / nucleus (1 = off)")->check(CLI::Range(0.0, 1.0));
  sub->add_option("--min-p", a->min_p, "min-p (0 = off)")->check(CLI::Range(0.0, 1.0));
  sub->add_option("--repeat-penalty", a->repeat_penalty, "repetition penalty (1 = off)")->check(CLI::Range(0.01, 100.0));
  sub->add_option("--seed", a->seed, "RNG seed (default: random)");
  sub->add_option("--stop", a->stop, "stop string (repeatable)");
  sub->add_flag("--ignore-eos", a->ignore_eos, "keep generating after EOS");
  sub->add_option("--kv-cache-dtype", a->kv_dtype, "KV cache dtype: f32, f16, bf16, fp8, int8");
  runners()[sub] = [a] { return run(*a); };
});

}  // namespace tritium::cli
