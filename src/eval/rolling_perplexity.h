// tritium eval: lm-evaluation-harness rolling-window perplexity (loglikelihood_rolling) with its word / byte
// normalizations.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "eval/loglikelihood.h"

namespace tritium {

/// lm_eval.utils.get_rolling_token_windows followed by make_disjoint_window: the first window predicts
/// tokens[0 : max_seq_len] from [prefix_token] + tokens[0 : max_seq_len-1]; each next window predicts up to
/// max_seq_len - context_len + 1 further tokens with the preceding tokens as context (max_seq_len inputs in
/// all). Every token is predicted exactly once. Returns {} for no tokens. Throws tritium::Error unless
/// 1 <= context_len <= max_seq_len.
std::vector<LoglikelihoodRequest> rolling_windows(std::span<const int32_t> tokens, int32_t prefix_token,
                                                  int max_seq_len, int context_len = 1);

/// Number of words as lm-eval counts them: len(re.split(r"\s+", text)) with Python's Unicode whitespace
/// (so leading or trailing whitespace adds an empty "word", as in lm-eval).
int64_t count_words_lm_eval(std::string_view text);

struct RollingPerplexityResult {
  double loglikelihood = 0;  ///< summed over every token (natural log)
  int64_t tokens = 0, words = 0, bytes = 0;
  int windows = 0;
  double token_perplexity = 0;  ///< exp(-ll / tokens)
  double word_perplexity = 0;   ///< exp(-ll / words)
  double byte_perplexity = 0;   ///< exp(-ll / bytes)
  double bits_per_byte = 0;     ///< -ll / bytes / ln 2
};

/// Normalizations of a total loglikelihood (lm-eval's weighted_perplexity and bits_per_byte).
RollingPerplexityResult rolling_metrics(double loglikelihood, int64_t tokens, std::string_view text);

/// Scores `tokens` (the text encoded without special tokens) in rolling windows of max_seq_len and returns the
/// metrics; words and bytes come from the original `text` (bytes = its UTF-8 length).
RollingPerplexityResult rolling_perplexity(const LoglikelihoodScorer& scorer, std::span<const int32_t> tokens,
                                           std::string_view text, int32_t prefix_token,
                                           const std::function<void(size_t, size_t)>& progress = {},
                                           const ScoredLogitsFn& on_logits = {});

}  // namespace tritium
