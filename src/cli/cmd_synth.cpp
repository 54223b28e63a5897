// tritium synth: write a synthetic BitNet checkpoint with real shapes (for benchmarks).
#include <fmt/format.h>

#include <filesystem>

#include "cli/commands.h"
#include "cli/common.h"
#include "core/error.h"
#include "model/synth.h"

namespace tritium::cli {
namespace {

struct SynthArgs {
  SynthOptions o;
  std::string out;
  std::string tokenizer;
};

std::string find_bundled_tokenizer() {
  // The Llama 3 tokenizer (the tokenizer of BitNet b1.58 2B4T) ships in models/llama3-tokenizer.
  const std::string tiny = resolve_model_dir("");
  const auto dir = std::filesystem::path(tiny).parent_path() / "llama3-tokenizer";
  return std::filesystem::exists(dir / "tokenizer.json") ? dir.string() : "";
}

int run(SynthArgs& a) {
  a.o.tokenizer_dir = a.tokenizer.empty() ? (a.o.shape != "bitnet-2b4t" ? resolve_model_dir("") : find_bundled_tokenizer())
                                          : a.tokenizer;
  if (a.o.tokenizer_dir.empty()) fail("synth: no tokenizer found; pass --tokenizer DIR (a folder with tokenizer.json)");
  write_synthetic_bitnet(a.out, a.o);
  fmt::print("wrote {} (shape {}, zero density {}, seed {}, tokenizer from {})\n", a.out, a.o.shape,
             a.o.zero_density, a.o.seed, a.o.tokenizer_dir);
  return 0;
}

}  // namespace

TRITIUM_REGISTER_COMMAND([](CLI::App& app) {
  auto a = std::make_shared<SynthArgs>();
  CLI::App* sub = app.add_subcommand("synth", "Write a synthetic BitNet checkpoint with real shapes (benchmarks)");
  sub->add_option("--shape", a->o.shape,
                  "bitnet-2b4t (microsoft/bitnet-b1.58-2B-4T sizes), qwen2-1.5b (Qwen2-1.5B's sizes with ternary "
                  "projections), tiny, or micro (a few KiB, for fuzzing seeds)");
  sub->add_option("--zero-density", a->o.zero_density, "fraction of zero ternary weights");
  sub->add_option("--seed", a->o.seed, "random seed");
  sub->add_option("--layers", a->o.num_layers, "decoder layers (default: the shape's)")->check(CLI::Range(1, 1024));
  sub->add_option("--intermediate", a->o.intermediate_size, "MLP width, a multiple of 4 (default: the shape's)")
      ->check(CLI::Range(4, 1 << 20));
  sub->add_option("--tokenizer", a->tokenizer, "folder with tokenizer.json to copy (default: bundled Llama 3)");
  sub->add_option("-o,--output", a->out, "output folder")->required();
  runners()[sub] = [a] { return run(*a); };
});

}  // namespace tritium::cli
