// tritium eval: perplexity of a model on a text.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "backend/backend.h"

namespace tritium {

struct PerplexityOptions {
  int n_ctx = 512;
  int max_chunks = 0;  ///< 0 = all chunks
  int32_t bos_id = 0;
  bool prepend_bos = true;
  KvDType kv_dtype = KvDType::kF32;  ///< KV cache dtype (to measure the perplexity effect of quantized caches)
  float kv_scale = 1.0f;             ///< fp8/int8 per-tensor scale (see calibrate_kv_scale in engine/engine.h)
  /// Optional: sees the logits float32 [vocab] of every scored position and the token it predicts, in order
  /// (used to save base distributions and for KL divergence).
  std::function<void(std::span<const float> logits, int32_t target)> on_scored;
};

struct PerplexityResult {
  double ppl = 0;
  double nll_sum = 0;
  int64_t scored_tokens = 0;
  int chunks = 0;
  std::vector<double> chunk_ppl;  ///< running ppl after each chunk
};

/// Perplexity by the llama.cpp convention (llama-perplexity), the procedure of the golden files:
/// chunk c takes tokens[c*(n_ctx-1) : (c+1)*(n_ctx-1)] with BOS prepended (n_ctx tokens), at most max_chunks
/// chunks; positions n_ctx/2 .. n_ctx-2 predict their next token and are scored; ppl = exp(sum nll / scored).
/// tokens: the text encoded without special tokens. Throws tritium::Error when the text is shorter than one
/// chunk or n_ctx exceeds the model context. on_chunk (optional) is called after each chunk.
PerplexityResult compute_perplexity(Backend& backend, const std::vector<int32_t>& tokens,
                                    const PerplexityOptions& opts,
                                    const std::function<void(int chunk, int total, double ppl)>& on_chunk = {});

}  // namespace tritium
