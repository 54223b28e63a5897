#include "cli/common.h"

#include <unistd.h>

#include <chrono>
#include <exception>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "core/parallel.h"
#include "executor/make_backend.h"
#include "model/model_files.h"

namespace fs = std::filesystem;

namespace tritium::cli {

void add_model_options(CLI::App* app, ModelOptions& o) {
  app->add_option("-m,--model", o.model_dir, "Hugging Face model folder, tritium model or GGUF file (default: bundled tiny-bitnet)");
  app->add_option("-t,--threads", o.threads, "CPU threads (default: all cores)");
  app->add_option("--weights", o.weights, "ternary weight format for BitNet models: auto, int8, i2, tq1, bitcos");
  app->add_option("--detect-ternary", o.detect_ternary,
                  "16-bit weights that are exactly ternary times a scale (TriLM, Ternary Bonsai, GGUF Q2_0) run packed "
                  "on the ternary kernels with int8 activations: on (default) or off (kept as stored)")
      ->check(CLI::IsMember({"on", "off"}));
  app->add_option("--quant", o.quant,
                  "quantize a 16/32-bit model's projections at load: int8-absmax, int8-zeropoint, int8-rowwise, "
                  "int8-vectorwise, llm-int8, int8-weight-only, ternary-absmean, ternary-absmean-g128, "
                  "ternary-threshold");
  app->add_option("--outlier-threshold", o.outlier_threshold, "LLM.int8() outlier threshold alpha (default 6.0)");
  app->add_option("--ternary-threshold", o.ternary_threshold, "ternary-threshold t (default: 0.7 mean|w| per tensor)");
  app->add_option("--lm-head", o.lm_head,
                  "output head storage: auto, f32, bf16 (exact: the f32 results at half the memory), and the lossy, "
                  "faster int8 (per-row int8), q6 (6-bit, groups of 32), q4 (4-bit, groups of 32); default auto = "
                  "the head as the checkpoint stores it (bf16 as published) on the CPU, f32 on a GPU (exact)");
  app->add_option("--device", o.device, "where the forward runs: cpu, cuda or cuda:N");
  app->add_option("--tensor-parallel,--tp", o.tensor_parallel,
                  "split the model over N GPUs (one process each, NCCL; needs --device cuda; cuda:K starts at GPU K)")
      ->check(CLI::Range(1, 64));
  app->add_option("--gemm-weights", o.gemm_weights,
                  "GPU: weights of the ternary GEMMs above 16 rows (batched decode, prefill): packed (2 bits per "
                  "weight, our tiled GEMM), int8 (an int8 copy beside the packed one, 1 byte per weight more: "
                  "cuBLASLt int8, same results, faster at batch) or auto (int8 when serving batches and the copy "
                  "takes at most 1/16 of the GPU's memory)")
      ->check(CLI::IsMember({"auto", "packed", "int8"}));
}

SamplingParams SamplingOptions::params() const {
  SamplingParams p;
  p.temperature = temp;
  p.top_k = top_k;
  p.top_p = top_p;
  p.min_p = min_p;
  p.repetition_penalty = repeat_penalty;
  if (seed >= 0) {
    p.seed = static_cast<uint64_t>(seed);
    p.has_seed = true;
  }
  return p;
}

void add_sampling_options(CLI::App* app, SamplingOptions& o) {
  app->add_option("--temp", o.temp, "temperature (0 = greedy)")->check(CLI::Range(0.0, 100.0));
  app->add_option("--top-k", o.top_k, "top-k (0 = off)")->check(CLI::Range(0, 1 << 30));
  app->add_option("--top-p", o.top_p, "top-p / nucleus (1 = off)")->check(CLI::Range(0.0, 1.0));
  app->add_option("--min-p", o.min_p, "min-p (0 = off)")->check(CLI::Range(0.0, 1.0));
  app->add_option("--repeat-penalty", o.repeat_penalty, "repetition penalty (1 = off)")->check(CLI::Range(0.01, 100.0));
  app->add_option("--seed", o.seed, "RNG seed (default: random)");
}

std::string resolve_model_dir(const std::string& m) {
  if (!m.empty()) {
    if (!fs::exists(m)) fail("{}: model folder or GGUF file not found", m);
    return m;
  }
  std::vector<fs::path> candidates = {fs::current_path() / "models/tiny-bitnet"};
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n > 0) {
    buf[n] = 0;
    const fs::path exe_dir = fs::path(buf).parent_path();
    candidates.push_back(exe_dir / "models/tiny-bitnet");
    candidates.push_back(exe_dir / "../models/tiny-bitnet");
    candidates.push_back(exe_dir / "../share/tritium/models/tiny-bitnet");
  }
  candidates.push_back(fs::path(TRITIUM_SOURCE_DIR) / "models/tiny-bitnet");
  for (const auto& c : candidates) {
    if (fs::exists(c / "config.json")) return fs::weakly_canonical(c).string();
  }
  fail("no model given (-m) and the bundled models/tiny-bitnet was not found");
}

// i2 streams at memory bandwidth on AVX2/AVX-512 CPUs; bitcos is decode-bound on a core of its own
// (bench/RESULTS.md, "Ternary CPU kernels"), so the fastest format on this kind of machine is i2.
TernaryFormat auto_ternary_format() { return TernaryFormat::kI2; }

// "auto" is the exact cache, float32, on every device: a bf16 or fp8 cache is a lossy opt-in (it changes greedy
// tokens at near ties: bench/RESULTS.md, "KV cache on the GPU").
KvDType kv_dtype_for(const std::string& flag) {
  if (flag != "auto") return parse_kv_dtype(flag);
  return KvDType::kF32;
}

LoadOptions make_load_options(const ModelOptions& o) {
  LoadOptions lo;
  lo.ternary_format = o.weights == "auto" ? auto_ternary_format() : parse_ternary_format(o.weights);
  lo.ternary_format_explicit = o.weights != "auto";
  lo.quant = o.quant;
  lo.detect_ternary = o.detect_ternary == "on";
  lo.outlier_threshold = o.outlier_threshold;
  lo.ternary_threshold = o.ternary_threshold;
  // The GPU backend uploads float32 and int8 heads only, so "auto" (which may pick bf16) is for the CPU.
  lo.lm_head = !o.lm_head.empty() ? o.lm_head : o.device == "cpu" ? "auto" : "";
  return lo;
}

LoadedModel load_model(const ModelOptions& o, bool need_tokenizer) {
  set_num_threads(o.threads);
  LoadedModel lm;
  lm.dir = resolve_model_dir(o.model_dir);
  const auto t0 = std::chrono::steady_clock::now();
  const LoadOptions lo = make_load_options(o);
  // The tokenizer first: building it from a GGUF's metadata or a tokenizer.json holds tens of MB of temporaries
  // (a 151k-token vocabulary and its merges as JSON), freed before the weights are loaded instead of on top of them.
  // Its error waits until the weights have loaded, so a model that is broken in both reports the weights' first.
  std::exception_ptr tokenizer_error;
  if (need_tokenizer) {
    try {
      lm.tokenizer = load_model_tokenizer(lm.dir);
    } catch (...) {
      tokenizer_error = std::current_exception();
    }
  }
  std::unique_ptr<Transformer> model = load_transformer(lm.dir, lo);
  if (tokenizer_error) std::rethrow_exception(tokenizer_error);
  if (lo.ternary_format_explicit) {
    bool any_ternary = false;
    for (const auto& L : model->layers())
      any_ternary = any_ternary || dynamic_cast<const TernaryLinear*>(L.qkv.get()) != nullptr;
    if (!any_ternary)
      fmt::print(stderr, "warning: --weights {} ignored: the model has no ternary projections (a float or int8 model; "
                         "--quant ternary-absmean makes ternary ones)\n",
                 o.weights);
  }
  DeviceSpec spec = parse_device(o.device, o.tensor_parallel);
  spec.cuda.single_sequence = o.single_sequence;
  spec.cuda.gemm_weights = o.gemm_weights;
  lm.backend = make_backend(std::move(model), spec);
  lm.load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return lm;
}

double peak_rss_mib() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  }
  return 0;
}

}  // namespace tritium::cli
