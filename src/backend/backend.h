// tritium backend: the interface of a device that runs a Transformer's forward pass (CPU: backend/cpu, NVIDIA GPUs:
// backend/cuda, a tensor-parallel group: executor/tp_launch.h).
//
// One forward call processes a flattened batch of sequence chunks (vLLM style): every chunk brings new tokens of
// one sequence starting at its current position, prefill and decode chunks mixed. Projections run as one GEMM
// over all tokens of the batch; attention runs per sequence over its paged KV cache (kv/kv_cache.h), addressed
// by the chunk's block table.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "backend/device_sampling.h"
#include "kv/kv_cache.h"
#include "model/transformer.h"

namespace tritium {

/// One chunk of a batch: `tokens` are new tokens of one sequence placed at positions start_pos, start_pos+1, ...
/// The sequence's block table must already cover start_pos + tokens.size() positions.
struct BatchChunk {
  std::span<const int32_t> tokens;
  int64_t start_pos = 0;
  std::span<const int32_t> block_table;
  bool all_logits = false;  ///< logits for every token (scoring) or only for the last one (generation)
  /// Positions from here on are generated tokens (each its own statistic segment, as when it was decoded);
  /// the default: every position is a prompt position.
  int64_t num_prompt = INT64_MAX;
};

/// Statistic segments: a backend splits the rows of each chunk at the prompt positions that are multiples of
/// kStatSegment and before every generated position, and a projection whose activation statistics span rows (the
/// per-tensor int8 methods, LLM.int8()'s outlier columns; quant/int8_projection.h) takes them per segment. A
/// segment's tokens depend only on the sequence, so the results of a request do not depend on its batch mates, on
/// how the scheduler cut its prompt into chunks (at segment boundaries, engine/scheduler.h), on a recompute after
/// preemption, or on which prefix of its prompt came from the cache.
inline constexpr int64_t kStatSegment = 16;

/// Whether row t of chunk ch starts a statistic segment.
inline bool starts_segment(const BatchChunk& ch, int64_t t) {
  const int64_t p = ch.start_pos + t;
  return t == 0 || p >= ch.num_prompt || p % kStatSegment == 0;
}

/// The first row of each statistic segment of `batch`, in row order (row_begin of Linear::forward).
std::vector<int64_t> segment_row_begins(std::span<const BatchChunk> batch);

/// A device's memory, for sizing the KV pool (Backend::reserve_device_memory).
struct DeviceMemoryInfo {
  size_t total = 0;  ///< bytes of device memory
  size_t used = 0;   ///< bytes in use now (this process: weights, workspace; and any other process)
};

/// Row counts of a validated batch.
struct BatchShape {
  int64_t tokens = 0;      ///< M: the sum of the chunks' token counts (rows of every projection)
  int64_t logit_rows = 0;  ///< rows of logits: sum over chunks of (all_logits ? tokens.size() : 1)
};

/// Checks a batch against the model and the cache: no empty chunk, every position inside
/// max_position_embeddings, every block table covering its chunk, every token id inside the vocabulary.
/// Throws tritium::Error naming the first violation.
BatchShape validate_batch(const ModelConfig& c, std::span<const BatchChunk> batch, const KvCache& cache);

class Backend {
 public:
  virtual ~Backend() = default;
  /// The model this backend runs (for a tensor-parallel group: rank 0's shard).
  const Transformer& model() const { return *model_; }

  /// Runs the batch: writes K/V of every new token into `cache` (or the device copy the backend attaches to it,
  /// KvCache::device_state) and returns logits, float32 [rows, vocab] with rows = BatchShape::logit_rows, in
  /// chunk order. Throws tritium::Error on a batch validate_batch rejects. One call at a time per backend: a
  /// backend keeps its per-step buffers between calls (the CPU backend's activations, a GPU backend's graphs).
  virtual void forward(std::span<const BatchChunk> batch, KvCache& cache, std::vector<float>& logits) = 0;
  /// Whether forward_sample() is available: the logits stay on the device and are sampled there.
  virtual bool samples_on_device() const { return false; }
  /// forward() of a batch whose chunks all want only their last logits (no all_logits), then sampling of logits
  /// row i (chunk i) by rows[i] (backend/device_sampling.h) on the device; only the sampled ids and the requested
  /// logprobs come back, in `out` (size rows.size(); inactive rows unspecified). rows.size() must equal the
  /// batch size. The default throws tritium::Error (backends without device sampling: the caller samples on the
  /// host from forward()'s logits).
  virtual void forward_sample(std::span<const BatchChunk> batch, KvCache& cache, std::span<const RowSampling> rows,
                              std::vector<SampledToken>& out);
  /// Positions [0, n) of K and V of `layer` of the sequence with block table `table`, as float32 [n, kv_dim] each,
  /// read from where forward() wrote them (a GPU backend: its device copy of the pools). The default reads the host
  /// cache (KvCache::gather). For the KV scale calibration of fp8 / int8 caches.
  virtual void read_kv(KvCache& cache, int layer, std::span<const int32_t> table, int64_t n, float* k, float* v);
  /// A backend whose KV pools live in device memory: allocates the workspace of the largest step (max_tokens rows
  /// over max_seqs sequences), so that later steps allocate nothing, and returns the device's memory as it then
  /// stands. Host backends: nullopt (their pools are sized from host memory).
  virtual std::optional<DeviceMemoryInfo> reserve_device_memory(int64_t max_tokens, int max_seqs) {
    return std::nullopt;
  }
  /// Bytes of the device memory the forward runs in (a GPU's total memory); 0 for host backends. For defaults that
  /// depend on the device's size (serve's tokens per step).
  virtual size_t device_memory_total() const { return 0; }
  /// A short name for reports ("CPU", "cuda:0 NVIDIA H200").
  virtual std::string name() const = 0;
  /// Whether forward runs on the host CPU (the read bandwidth of host memory is then its roofline).
  virtual bool on_cpu() const { return false; }

 protected:
  /// `model` is kept alive as long as the backend (a borrowed pointer, see borrow(), is the caller's to keep).
  explicit Backend(std::shared_ptr<const Transformer> model) : model_(std::move(model)) {}
  std::shared_ptr<const Transformer> model_;
};

/// A non-owning pointer to `m`: the caller keeps the model alive as long as the backend built from it.
inline std::shared_ptr<const Transformer> borrow(const Transformer& m) {
  return std::shared_ptr<const Transformer>(std::shared_ptr<const Transformer>(), &m);
}

}  // namespace tritium
