// tritium generate: stream a completion of a prompt to stdout; figures on stderr.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdio>

#include "cli/commands.h"
#include "cli/common.h"
#include "engine/generator.h"

namespace tritium::cli {
namespace {

struct GenerateArgs {
  ModelOptions model;
  std::string prompt;
  int n = 128;
  SamplingOptions sampling;
  std::vector<std::string> stop;
  bool ignore_eos = false;
  bool token_ids = false;
  std::string kv_dtype = "auto";
};

int run(const GenerateArgs& a) {
  ModelOptions mo = a.model;
  mo.single_sequence = true;  // one sequence: the CUDA backend's "auto" layout picks the batch-1 kernels
  LoadedModel lm = load_model(mo);
  Generator gen(*lm.backend, *lm.tokenizer);
  GenerateOptions go;
  go.max_new_tokens = a.n;
  go.sampling = a.sampling.params();
  go.stop = a.stop;
  go.ignore_eos = a.ignore_eos;
  go.kv_dtype = kv_dtype_for(a.kv_dtype);
  const std::vector<int32_t> ids = gen.encode_prompt(a.prompt);
  std::fwrite(a.prompt.data(), 1, a.prompt.size(), stdout);
  std::fflush(stdout);
  GenerateStats st;
  const std::vector<int32_t> out = gen.generate(ids, go, [](const std::string& s) {
    std::fwrite(s.data(), 1, s.size(), stdout);
    std::fflush(stdout);
  }, &st);
  std::fputc('\n', stdout);
  if (a.token_ids) fmt::print(stderr, "token ids: {{\"prompt\": [{}], \"generated\": [{}]}}\n", fmt::join(ids, ", "),
                              fmt::join(out, ", "));
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
  add_sampling_options(sub, a->sampling);
  sub->add_option("--stop", a->stop, "stop string (repeatable)");
  sub->add_flag("--ignore-eos", a->ignore_eos, "keep generating after EOS");
  sub->add_flag("--token-ids", a->token_ids,
                "also print the prompt's and the generated token ids on stderr, as one JSON line after 'token ids: '");
  sub->add_option("--kv-cache-dtype", a->kv_dtype,
                  "KV cache dtype: auto (= f32, exact), f32, f16, bf16, fp8, int8");
  runners()[sub] = [a] { return run(*a); };
});

}  // namespace tritium::cli
