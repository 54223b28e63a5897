#include "eval/rolling_perplexity.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace tritium {

std::vector<LoglikelihoodRequest> rolling_windows(std::span<const int32_t> tokens, int32_t prefix_token,
                                                  int max_seq_len, int context_len) {
  TRITIUM_CHECK(context_len >= 1 && context_len <= max_seq_len,
                "rolling windows: context_len {} must be in [1, max_seq_len = {}]", context_len, max_seq_len);
  std::vector<LoglikelihoodRequest> out;
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (n == 0) return out;
  const int64_t L = max_seq_len;
  const int64_t pred_len = L - context_len + 1;
  auto slice = [&](int64_t b, int64_t e) { return std::vector<int32_t>(tokens.begin() + b, tokens.begin() + e); };
  // Each window (context a, continuation b) is made disjoint: a keeps its first len(a) - (len(b) - 1) ids.
  auto push = [&](std::vector<int32_t> a, std::vector<int32_t> b) {
    a.resize(a.size() - (b.size() - 1));
    out.push_back({std::move(a), std::move(b)});
  };
  const int64_t first = std::min(L, n);
  std::vector<int32_t> a0{prefix_token};
  const auto head = slice(0, first - 1);
  a0.insert(a0.end(), head.begin(), head.end());
  push(std::move(a0), slice(0, first));
  int64_t predicted = first;
  while (predicted < n) {
    const int64_t wl = std::min(n - predicted, pred_len);
    const int64_t end = predicted + wl;
    push(slice(end - L - 1, end - 1), slice(end - wl, end));
    predicted += wl;
  }
  return out;
}

namespace {

// Python str.isspace() code points (what re's \s matches in a str pattern).
bool is_py_space(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

}  // namespace

int64_t count_words_lm_eval(std::string_view text) {
  int64_t runs = 0;
  bool in_space = false;
  for (size_t i = 0; i < text.size();) {
    const unsigned char c0 = static_cast<unsigned char>(text[i]);
    uint32_t cp = c0;
    size_t len = 1;
    if (c0 >= 0xF0) len = 4, cp = c0 & 0x07;
    else if (c0 >= 0xE0) len = 3, cp = c0 & 0x0F;
    else if (c0 >= 0xC0) len = 2, cp = c0 & 0x1F;
    if (len > 1) {
      if (i + len > text.size()) len = text.size() - i;
      for (size_t k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<unsigned char>(text[i + k]) & 0x3F);
    }
    const bool sp = is_py_space(cp);
    if (sp && !in_space) ++runs;
    in_space = sp;
    i += len;
  }
  return runs + 1;
}

RollingPerplexityResult rolling_metrics(double loglikelihood, int64_t tokens, std::string_view text) {
  RollingPerplexityResult r;
  r.loglikelihood = loglikelihood;
  r.tokens = tokens;
  r.words = count_words_lm_eval(text);
  r.bytes = static_cast<int64_t>(text.size());
  r.token_perplexity = tokens > 0 ? std::exp(-loglikelihood / static_cast<double>(tokens)) : 0;
  r.word_perplexity = std::exp(-loglikelihood / static_cast<double>(r.words));
  r.byte_perplexity = r.bytes > 0 ? std::exp(-loglikelihood / static_cast<double>(r.bytes)) : 0;
  r.bits_per_byte = r.bytes > 0 ? -loglikelihood / static_cast<double>(r.bytes) / std::log(2.0) : 0;
  return r;
}

RollingPerplexityResult rolling_perplexity(const LoglikelihoodScorer& scorer, std::span<const int32_t> tokens,
                                           std::string_view text, int32_t prefix_token,
                                           const std::function<void(size_t, size_t)>& progress,
                                           const ScoredLogitsFn& on_logits) {
  TRITIUM_CHECK(!tokens.empty(), "rolling perplexity: the text has no tokens");
  const auto windows = rolling_windows(tokens, prefix_token, scorer.max_length(), 1);
  const auto res = scorer.score(windows, progress, on_logits);
  double ll = 0;
  for (const auto& r : res) ll += r.logprob;
  RollingPerplexityResult out = rolling_metrics(ll, static_cast<int64_t>(tokens.size()), text);
  out.windows = static_cast<int>(windows.size());
  return out;
}

}  // namespace tritium
