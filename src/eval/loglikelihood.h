// tritium eval: batched loglikelihood scoring of (context, continuation) token pairs, lm-evaluation-harness
// semantics (HFLM._loglikelihood_tokens), on the paged-KV Transformer.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "tokenizer/tokenizer.h"

namespace tritium {

/// Token ids of one request: score log P(continuation | context).
struct LoglikelihoodRequest {
  std::vector<int32_t> context, continuation;
};

struct LoglikelihoodResult {
  double logprob = 0;      ///< sum over continuation tokens of log_softmax (natural log)
  bool is_greedy = false;  ///< every continuation token is the argmax (first index on ties, as torch.argmax)
};

/// lm-eval's _encode_pair: trailing whitespace of `context` moves to the front of `continuation`; then
/// whole = encode(context + continuation), ctx = encode(context), continuation tokens = whole[len(ctx):].
/// encode adds special tokens only when add_special_tokens (lm-eval HFLM add_bos_token, default false).
/// An empty context becomes [prefix_token] with the continuation encoded alone (lm-eval's loglikelihood);
/// throws tritium::Error when the context is empty and no prefix token is given.
LoglikelihoodRequest encode_pair(const Tokenizer& tok, std::string_view context, std::string_view continuation,
                                 bool add_special_tokens, std::optional<int32_t> prefix_token = std::nullopt);

/// Receives the logits [vocab] of every scored position, in request order then token order, with the target
/// id (used to save base-model distributions and to compute KL divergence).
using ScoredLogitsFn = std::function<void(size_t request, size_t token, std::span<const float> logits,
                                          int32_t target)>;

struct ScorerOptions {
  int max_length = 0;       ///< lm-eval max_length; 0 = the model's max_position_embeddings
  int batch_tokens = 1024;  ///< tokens per forward call (bounds the logits buffer: rows x vocab floats)
  int block_size = 16;      ///< KV cache block size
  KvDType kv_dtype = KvDType::kF32;  ///< KV cache dtype (to measure the effect of quantized caches)
  float kv_scale = 1.0f;             ///< fp8/int8 per-tensor KV scale
};

/// Scores requests the way lm-eval's HFLM does: input = (context + continuation)[-(max_length+1):][:-1], the
/// continuation's log-probabilities are read at the last len(continuation) positions. Several sequences run
/// in one Backend::forward call; consecutive requests that share their context (the choices of one
/// multiple-choice question) prefill it once and share its KV cache blocks, then each runs its own tail
/// (the context's last partial block + the continuation).
class LoglikelihoodScorer {
 public:
  LoglikelihoodScorer(Backend& backend, ScorerOptions opts = {});

  /// Throws tritium::Error when a continuation is empty or longer than max_length tokens.
  /// progress(done, total) is called after every batch; on_logits (optional) sees every scored position.
  std::vector<LoglikelihoodResult> score(std::span<const LoglikelihoodRequest> requests,
                                         const std::function<void(size_t, size_t)>& progress = {},
                                         const ScoredLogitsFn& on_logits = {}) const;

  int max_length() const { return max_length_; }

 private:
  Backend& backend_;
  ScorerOptions opts_;
  int max_length_;
};

/// log_softmax(logits)[target] in double precision, and whether target is the argmax (first max index).
std::pair<double, bool> token_logprob(std::span<const float> logits, int32_t target);

}  // namespace tritium
