// tritium engine: next-token sampling from logits.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <span>
#include <vector>

#include "backend/device_sampling.h"
#include "grammar/token_grammar.h"

namespace tritium {

/// Sampling parameters (OpenAI / vLLM / HF semantics).
struct SamplingParams {
  float temperature = 1.0f;  ///< 0 = greedy (argmax)
  int top_k = 0;             ///< 0 or < 0 = disabled
  float top_p = 1.0f;        ///< nucleus; 1 = disabled
  float min_p = 0.0f;        ///< drop tokens with p < min_p * p_max; 0 = disabled
  float repetition_penalty = 1.0f;  ///< HF/CTRL: logit > 0 ? logit / r : logit * r for tokens seen so far
  float presence_penalty = 0.0f;    ///< OpenAI: logit -= presence if the token appeared in the output
  float frequency_penalty = 0.0f;   ///< OpenAI: logit -= frequency * count in the output
  uint64_t seed = 0;
  bool has_seed = false;
};

/// Whether `p` samples greedily (temperature <= 0 or top_k == 1): argmax, ties -> lowest id, no draw.
inline bool is_greedy(const SamplingParams& p) { return p.temperature <= 0.0f || p.top_k == 1; }

/// Copies the rule of `p` (temperature, top-k / top-p / min-p, penalties) into a device sampling row; the draw,
/// the token lists, the masks and logprobs stay the caller's.
inline void set_row_rule(const SamplingParams& p, RowSampling& r) {
  r.temperature = p.temperature;
  r.top_k = p.top_k;
  r.top_p = p.top_p;
  r.min_p = p.min_p;
  r.repetition_penalty = p.repetition_penalty;
  r.presence_penalty = p.presence_penalty;
  r.frequency_penalty = p.frequency_penalty;
}

/// The sampling rule after the penalties, given the draw u in [0, 1): candidates are the finite logits divided by
/// the temperature, ordered by (value descending, id ascending); top-k keeps the first k, softmax over those (exp
/// in double rounded to float, sum in double, p = float(e / sum)), top-p keeps the shortest prefix whose
/// cumulative p reaches top_p, min-p keeps p >= min_p * p_max; then the kept set is walked in token id order and
/// the first id whose cumulative p exceeds u * (sum of kept p) is returned (the last kept id if rounding leaves
/// none; 0 when no logit is finite). Greedy parameters (is_greedy) return the argmax. The device sampler
/// (backend/device_sampling.h) implements the same rule; `scratch` is reused between calls.
int32_t sample_with_uniform(const SamplingParams& p, std::span<const float> logits, double u,
                            std::vector<std::pair<float, int32_t>>& scratch);

/// One request's sampler. Order: repetition/presence/frequency penalties -> temperature -> top-k -> top-p ->
/// min-p -> draw (sample_with_uniform). Greedy when temperature == 0 (ties -> lowest id). A fixed seed gives
/// reproducible draws: one uniform per sampled (non-greedy) token from the request's own generator.
class Sampler {
 public:
  explicit Sampler(const SamplingParams& p);
  /// Picks the next token. logits: [vocab] float32 (modified in place). prompt: prompt ids (for the repetition
  /// penalty), output: generated ids so far.
  int32_t sample(std::span<float> logits, std::span<const int32_t> prompt, std::span<const int32_t> output);
  /// The next draw in [0, 1) of the request's generator: what sample() consumes for a non-greedy token (the
  /// engine takes it here when the backend samples on the device).
  double next_uniform();
  const SamplingParams& params() const { return p_; }

 private:
  SamplingParams p_;
  std::mt19937_64 rng_;
  std::vector<std::pair<float, int32_t>> cand_;
};

/// Constraints on which token may be sampled next (vLLM's SamplingParams semantics).
struct TokenConstraints {
  /// EOS and the stop token ids are masked until this many tokens have been generated.
  int64_t min_tokens = 0;
  /// Non-empty: only these ids may be sampled.
  std::vector<int32_t> allowed_token_ids;
  /// Token sequences that must not be generated: a one-token sequence is never sampled; for a longer one, its
  /// last token is masked whenever the output ends with the others.
  std::vector<std::vector<int32_t>> bad_words;
  /// Structured output (grammar/token_grammar.h): only tokens that keep the output a prefix of the grammar's
  /// language, and EOS / stop ids only once the output is complete. Null = no grammar.
  std::shared_ptr<grammar::TokenGrammar> grammar;
  bool empty() const { return min_tokens == 0 && allowed_token_ids.empty() && bad_words.empty() && !grammar; }
};

/// Sets the logits of the tokens `c` forbids after `output` to -inf. `stop_ids`: EOS and stop token ids, masked
/// while output.size() < min_tokens unless no other token would remain, and while the grammar (at
/// `grammar_state`, the state after `output`) is not complete. Returns false when no token remains
/// (allowed_token_ids, bad_words and the grammar exclude everything); logits are then unspecified.
bool apply_token_constraints(const TokenConstraints& c, std::span<float> logits, std::span<const int32_t> output,
                             std::span<const int32_t> stop_ids, int32_t grammar_state = -1);

/// The same constraints as a mask for a device sampler: `allow` (bit t % 64 of word t / 64 set: id t may be
/// sampled; empty: every id; ids at or past allow.size() * 64 may not) and `banned` (distinct ids in [0, V)).
/// Setting every id outside `allow` or in `banned` to -inf gives the logits apply_token_constraints leaves, for any
/// row of finite logits (min_tokens yields to the stop ids under the same rule). Returns false when no token
/// remains; allow and banned are then unspecified.
bool token_constraint_mask(const TokenConstraints& c, int64_t V, std::span<const int32_t> output,
                           std::span<const int32_t> stop_ids, int32_t grammar_state, std::vector<uint64_t>& allow,
                           std::vector<int32_t>& banned);

/// Applies the penalties of `p` to logits in place (exposed for tests).
void apply_penalties(const SamplingParams& p, std::span<float> logits, std::span<const int32_t> prompt,
                     std::span<const int32_t> output);

/// log-softmax of logits[id] (natural log).
float log_prob(std::span<const float> logits, int32_t id);

}  // namespace tritium
