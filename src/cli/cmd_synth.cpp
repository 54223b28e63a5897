// tritium synth: write a synthetic checkpoint with real shapes (for benchmarks): a BitNet folder or a Ternary
// Bonsai-shaped Qwen3 GGUF file.
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
  if (synth_shape_is_gguf(a.o.shape)) {
    a.o.tokenizer_dir = a.tokenizer;
    write_synthetic_qwen3_gguf(a.out, a.o);
    fmt::print("wrote {} (shape {}, {}{}, zero density {}, seed {}, tokenizer from {})\n", a.out, a.o.shape,
               a.o.gguf_type, a.o.gguf_type == "q2_0" ? fmt::format(" in {}-weight blocks", a.o.q2_block) : "",
               a.o.zero_density, a.o.seed, a.o.tokenizer_dir);
    return 0;
  }
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
  CLI::App* sub = app.add_subcommand("synth", "Write a synthetic ternary checkpoint with real shapes (benchmarks)");
  sub->add_option("--shape", a->o.shape,
                  "bitnet-2b4t (microsoft/bitnet-b1.58-2B-4T sizes), qwen2-1.5b (Qwen2-1.5B's sizes with ternary "
                  "projections), tiny, micro (a few KiB, for fuzzing seeds): BitNet folders; qwen3-1.7b, qwen3-8b (Ternary Bonsai "
                  "1.7B / 8B sizes), qwen3-micro: Qwen3 GGUF files with group-128 ternary weights, head and embedding");
  sub->add_option("--type", a->o.gguf_type, "GGUF shapes: q2_0 (ggml type 42, default) or f16 (the same weights)")
      ->check(CLI::IsMember({"q2_0", "f16"}));
  sub->add_option("--q2-block", a->o.q2_block, "GGUF Q2_0 layout: 128 (PrismML's 34-byte blocks, default) or 64 "
                  "(mainline ggml's 18-byte blocks)")->check(CLI::IsMember({64, 128}));
  sub->add_option("--zero-density", a->o.zero_density, "fraction of zero ternary weights");
  sub->add_option("--seed", a->o.seed, "random seed");
  sub->add_option("--layers", a->o.num_layers, "decoder layers (default: the shape's)")->check(CLI::Range(1, 1024));
  sub->add_option("--intermediate", a->o.intermediate_size, "MLP width, a multiple of 4 (default: the shape's)")
      ->check(CLI::Range(4, 1 << 20));
  sub->add_option("--tokenizer", a->tokenizer, "folder with tokenizer.json to copy (default: bundled Llama 3; the GGUF "
                  "shapes need the Qwen3 tokenizer)");
  sub->add_option("-o,--output", a->out, "output folder (GGUF shapes: output file)")->required();
  runners()[sub] = [a] { return run(*a); };
});

}  // namespace tritium::cli
