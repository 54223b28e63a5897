// tritium kernels/cuda: token sampling from device logits, one block per logits row.
//
// Per row, in one kernel: ids outside the row's allow mask (token constraints: a grammar, allowed_token_ids) are
// read as -inf, banned ids -> -inf and the repetition / presence / frequency penalties (the touched
// logits saved first), then greedy argmax (ties: lowest id) or temperature -> top-k -> top-p -> min-p -> a draw
// that walks the kept ids in id order with the row's uniform, then the saved logits restored and, when asked, the
// log-softmax of the raw row at the sampled id, its rank and the top k. The rule and its float operations are
// engine/sampler.h's sample_with_uniform (exp in double rounded to float, softmax sum in double, p = float(e /
// sum)); top-k and top-p cut the (value descending, id ascending) order by a radix select over the order-preserving
// bits of the scaled logits, so no sort runs. Sums are taken in a different order than on the CPU, so a draw can
// differ only where u * total falls within rounding of a boundary between two tokens.
//
// Only code built with TRITIUM_HAVE_CUDA includes this header.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace tritium::cuda {

/// Most top logprobs per row.
inline constexpr int kSampleMaxTop = 20;

/// One row's sampling parameters (device array, one per logits row).
struct SampleRowParams {
  double uniform = 0;        ///< draw in [0, 1)
  float temperature = 1.0f;  ///< <= 0 or top_k == 1: greedy
  float top_p = 1.0f, min_p = 0.0f;
  float rep = 1.0f, presence = 0.0f, frequency = 0.0f;
  int32_t top_k = 0;
  int32_t logprobs = -1;  ///< < 0: none; else 0..kSampleMaxTop top entries
  int32_t active = 1;     ///< 0: the row is skipped (its result is not written)
  int32_t pen_begin = 0, pen_count = 0;  ///< entries in the penalty array
  int32_t ban_begin = 0, ban_count = 0;  ///< entries in the banned-id array (distinct ids in [0, V))
  int32_t allow_begin = -1;  ///< < 0: every id may be sampled; else the row's mask starts at word allow_begin of
                             ///< the allow array: ceil(V / 32) words, id i allowed when bit i % 32 of word i / 32 is set
};

/// One id's penalty: seen (the repetition penalty applies), count in the output (presence / frequency).
struct SamplePenalty {
  int32_t id, seen, count;
};

/// One row's result.
struct SampleResult {
  int32_t id;
  float logprob;  ///< of the raw logits (before bans and penalties)
  int32_t rank;   ///< 1 + ids with a higher raw logit
  int32_t top_id[kSampleMaxTop];
  float top_lp[kSampleMaxTop];
};

/// Samples `rows` rows of logits [rows, V] float (modified during the kernel, restored bit for bit before it
/// ends). params [rows]; pen / ban / allow: the rows' entries (SampleRowParams ranges; allow may be null when no
/// row has a mask); saved_pen / saved_ban scratch of the same sizes as pen / ban; out [rows]. A row's mask must
/// leave at least one id (its pick is otherwise unspecified). Throws tritium::Error on a launch error.
void sample_rows(float* logits, int V, int rows, const SampleRowParams* params, const SamplePenalty* pen,
                 const int32_t* ban, const uint32_t* allow, float* saved_pen, float* saved_ban, SampleResult* out,
                 cudaStream_t stream);

}  // namespace tritium::cuda
