// tritium backend: sampling on the device (Backend::forward_sample) — what one logits row is sampled with, what
// comes back, and the host-side packing of the penalty lists that the device kernels read.
//
// The rule is the engine's CPU sampler (engine/sampler.h, sample_with_uniform) bit for bit in its integer
// decisions: ids outside the allow mask and banned ids -> -inf, then the repetition / presence / frequency penalties, then greedy argmax or
// temperature -> top-k -> top-p -> min-p -> a draw walking the kept ids in id order with the row's uniform. The
// uniform comes from the request's own generator on the host, so a seeded request draws the same tokens whatever
// runs beside it. Logprobs are of the raw logits (before bans and penalties), natural log.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace tritium {

/// Most top_logprobs a row may ask for on the device.
inline constexpr int kMaxDeviceTopLogprobs = 20;

/// How one logits row is sampled.
struct RowSampling {
  bool active = true;        ///< false: the row is not sampled (a prefill chunk short of its end); its result is unspecified
  float temperature = 1.0f;  ///< <= 0: greedy (also when top_k == 1)
  int top_k = 0;             ///< <= 0: off
  float top_p = 1.0f;        ///< (0, 1]; 1: off
  float min_p = 0.0f;        ///< [0, 1]; 0: off
  float repetition_penalty = 1.0f;  ///< on ids of prompt and output
  float presence_penalty = 0.0f;    ///< on ids of output
  float frequency_penalty = 0.0f;   ///< times the count in output
  double uniform = 0.0;             ///< the draw in [0, 1) (ignored when greedy)
  std::span<const int32_t> prompt;  ///< prompt ids (repetition penalty)
  std::span<const int32_t> output;  ///< generated ids so far
  std::span<const int32_t> banned;  ///< ids set to -inf before the penalties (token constraints), each in [0, vocab)
  /// Token constraints as a mask (engine/sampler.h token_constraint_mask): empty: every id may be sampled; else id
  /// t may be sampled only when bit t % 64 of word t / 64 is set (ids past the mask may not). At least one id must
  /// remain (allowed and not banned).
  std::span<const uint64_t> allowed;
  int logprobs = -1;  ///< < 0: none; k in [0, kMaxDeviceTopLogprobs]: the sampled id's logprob and rank, top k
};

/// What comes back for one row.
struct SampledToken {
  int32_t id = 0;
  float logprob = 0;  ///< RowSampling::logprobs >= 0: log-softmax of the raw logits at id
  int rank = 1;       ///< 1 + the number of ids with a higher raw logit
  std::vector<std::pair<int32_t, float>> top;  ///< the k most likely ids and their logprobs, best first (ties: lower id)
};

/// One id's penalty on the device: seen (in prompt or output: the repetition penalty applies), count in output
/// (presence and frequency penalties). Entries of one row have distinct ids.
struct PenaltyEntry {
  int32_t id = 0;
  int32_t seen = 0;
  int32_t count = 0;
};

/// Appends the penalty entries of `r` to `out` (nothing when its penalties are off), ids ascending. Ids outside
/// [0, vocab) are skipped, as the CPU sampler does.
void append_penalty_entries(const RowSampling& r, int32_t vocab, std::vector<PenaltyEntry>& out);

}  // namespace tritium
