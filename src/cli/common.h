// tritium CLI: options and helpers shared by subcommands (model path resolution, loading, figures).
#pragma once

#include <CLI/CLI.hpp>

#include <memory>
#include <string>

#include "backend/backend.h"
#include "model/loader.h"
#include "engine/sampler.h"
#include "tokenizer/tokenizer.h"

namespace tritium::cli {

/// Options every model-running subcommand takes.
struct ModelOptions {
  std::string model_dir;  ///< -m; empty = the bundled tiny-bitnet
  int threads = 0;        ///< -t; 0 = all cores
  std::string weights = "auto";  ///< --weights: ternary storage format for BitNet models
  std::string quant;             ///< --quant: post-training quantization of a 16/32-bit model at load
  std::string detect_ternary = "on";  ///< --detect-ternary: on / off (LoadOptions::detect_ternary)
  float outlier_threshold = 6.0f;  ///< --outlier-threshold: LLM.int8() alpha
  float ternary_threshold = 0.0f;  ///< --ternary-threshold: t of ternary-threshold (0 = TWN 0.7 mean|w|)
  std::string lm_head;             ///< --lm-head: auto, f32, bf16, int8, q6, q4 ("" = auto on the CPU, f32 on a GPU)
  std::string device = "cpu";    ///< --device: cpu or cuda[:N]
  int tensor_parallel = 1;       ///< --tensor-parallel: GPUs (one process each) the model is split over
  std::string gemm_weights = "auto";  ///< --gemm-weights (CudaOptions::gemm_weights)
  bool single_sequence = false;  ///< set by generate / chat: one sequence at a time (CudaOptions::single_sequence)
};

/// --kv-cache-dtype: "auto" is f32, the exact cache, on every device (bf16 / fp8 / int8 are lossy opt-ins: their
/// effect in bench/RESULTS.md); any other value as parse_kv_dtype.
KvDType kv_dtype_for(const std::string& flag);

/// LoadOptions from the command line (--weights auto -> auto_ternary_format(); an explicit format also repacks
/// tritium models stored in another format).
LoadOptions make_load_options(const ModelOptions& o);

void add_model_options(CLI::App* app, ModelOptions& o);

/// Sampling options shared by generate and chat (llama.cpp names).
struct SamplingOptions {
  float temp = 0.8f, top_p = 1.0f, min_p = 0.0f, repeat_penalty = 1.0f;
  int top_k = 40;
  int64_t seed = -1;  ///< < 0: random
  SamplingParams params() const;
};
void add_sampling_options(CLI::App* app, SamplingOptions& o);

/// Resolves -m: the given folder or GGUF file, or the bundled models/tiny-bitnet (next to the working directory, the
/// executable, or the source tree). Throws tritium::Error when nothing is found.
std::string resolve_model_dir(const std::string& m);

struct LoadedModel {
  std::string dir;
  /// Where the model runs (executor/make_backend.h); it owns the model (for tensor parallelism: rank 0's shard).
  std::shared_ptr<Backend> backend;
  std::unique_ptr<Tokenizer> tokenizer;
  double load_seconds = 0;
  const Transformer& model() const { return backend->model(); }
};

/// Sets the thread count, loads model + tokenizer (tokenizer.json in the model folder, or a GGUF file's metadata).
LoadedModel load_model(const ModelOptions& o, bool need_tokenizer = true);

/// Peak resident set size of this process in MiB (VmHWM).
double peak_rss_mib();

/// The ternary format `--weights auto` picks on this machine.
TernaryFormat auto_ternary_format();

}  // namespace tritium::cli
