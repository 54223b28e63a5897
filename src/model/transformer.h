// tritium model: the decoder-only transformer (Llama / Qwen2 / BitNet b1.58) forward pass on CPU.
//
// One forward call processes a flattened batch of sequence chunks (vLLM style): every chunk brings new tokens
// of one sequence starting at its current position, prefill and decode chunks mixed. Projections run as one GEMM
// over all tokens of the batch; attention runs per sequence over its paged KV cache.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "io/model_config.h"
#include "model/linear.h"
#include "parallel/plan.h"
#include "runtime/kv_cache.h"

namespace tritium {

class Communicator;

/// Weights of one decoder layer. Projections are fused: qkv = [q; k; v] rows, gate_up = [gate; up] rows.
struct LayerWeights {
  std::vector<float> input_norm, post_attn_norm;  ///< [hidden]
  std::vector<float> attn_sub_norm;               ///< [hidden] (BitNet only)
  std::vector<float> ffn_sub_norm;                ///< [intermediate] (BitNet only)
  std::unique_ptr<Linear> qkv, o, gate_up, down;
};

/// One chunk of a batch: `tokens` are new tokens of one sequence placed at positions start_pos, start_pos+1, ...
/// The sequence's block table must already cover start_pos + tokens.size() positions.
struct BatchChunk {
  std::span<const int32_t> tokens;
  int64_t start_pos = 0;
  std::span<const int32_t> block_table;
  bool all_logits = false;  ///< logits for every token (scoring) or only for the last one (generation)
};

/// Called with the input of every linear layer (for outlier analysis): layer index, projection name
/// ("qkv", "o", "gate_up", "down"), x [M, K].
using ActivationObserver = std::function<void(int layer, const char* proj, const float* x, int64_t M, int64_t K)>;

/// Runs Transformer::forward on an accelerator instead of the CPU (the CUDA backend: runtime/cuda_backend.h).
/// It receives the same batch, the host KvCache object (whose device_state() it may use for its own copy of the
/// pool) and fills logits exactly as the CPU forward documents. Batch validation has been done by the caller.
class ForwardBackend {
 public:
  virtual ~ForwardBackend() = default;
  virtual void forward(std::span<const BatchChunk> batch, KvCache& cache, std::vector<float>& logits) = 0;
  /// A short name for reports ("cuda:0 NVIDIA H200").
  virtual std::string name() const = 0;
};

class Transformer {
 public:
  Transformer(ModelConfig config, std::shared_ptr<const std::vector<float>> embed, std::vector<LayerWeights> layers,
              std::vector<float> final_norm, std::unique_ptr<Linear> lm_head);

  const ModelConfig& config() const { return config_; }
  int vocab_size() const { return config_.vocab_size; }

  /// Runs the batch; writes K/V of every new token into `cache` and returns logits, float32
  /// [rows, vocab] where rows = sum over chunks of (all_logits ? tokens.size() : 1), in chunk order.
  /// Throws tritium::Error on a token id outside the vocabulary or a position past max_position_embeddings.
  void forward(std::span<const BatchChunk> batch, KvCache& cache, std::vector<float>& logits) const;

  void set_activation_observer(ActivationObserver obs) { observer_ = std::move(obs); }
  /// Keeps an object (e.g. the memory-mapped model file whose bytes packed weights borrow) alive as long as
  /// the model.
  void set_keep_alive(std::shared_ptr<const void> k) { keep_alive_ = std::move(k); }

  /// Routes forward() to an accelerator backend (nullptr: back to the CPU). The activation observer is not
  /// called on a backend.
  void set_backend(std::shared_ptr<ForwardBackend> b) { backend_ = std::move(b); }
  ForwardBackend* backend() const { return backend_.get(); }
  /// RoPE inverse frequencies [head_dim / 2], float32 as HF computes them.
  const std::vector<float>& rope_inv_freq() const { return inv_freq_; }

  /// Bytes of all weights as stored (projections in their format + embeddings/norms in f32).
  size_t weight_bytes() const;
  /// Bytes of the projection weights read per decoded token (the decode roofline numerator), including lm_head.
  size_t weight_bytes_per_token() const;
  const std::vector<LayerWeights>& layers() const { return layers_; }
  const Linear& lm_head() const { return *lm_head_; }
  const std::vector<float>& embedding() const { return *embed_; }
  std::shared_ptr<const std::vector<float>> embedding_shared() const { return embed_; }

  /// Marks this model as the shard of one tensor-parallel rank (parallel/shard.h builds it). The CPU forward then
  /// calls `comm`'s collectives (all-reduce after row-parallel o/down, all-gathers in gather mode and for the
  /// vocabulary-parallel lm_head) and returns full logits on every rank. comm may be null when a backend brings
  /// its own collectives (the CUDA backend: NCCL).
  void set_tensor_parallel(TensorParallelPlan plan, std::shared_ptr<Communicator> comm);
  /// The rank's plan; nullptr for an unsharded model.
  const TensorParallelPlan* tp_plan() const { return tp_ ? tp_.get() : nullptr; }
  const std::vector<float>& final_norm() const { return final_norm_; }

 private:
  void attention(const BatchChunk& c, int layer, const float* q, KvCache& cache, float* out) const;
  void observe(int layer, const char* proj, const float* x, int64_t M, int64_t K) const {
    if (observer_) observer_(layer, proj, x, M, K);
  }

  ModelConfig config_;
  std::shared_ptr<const std::vector<float>> embed_;  ///< [vocab, hidden], shared with lm_head when tied
  std::vector<LayerWeights> layers_;
  std::vector<float> final_norm_;
  std::unique_ptr<Linear> lm_head_;
  std::vector<float> inv_freq_;  ///< [head_dim / 2] RoPE inverse frequencies, float32 as HF computes them
  ActivationObserver observer_;
  std::shared_ptr<const void> keep_alive_;
  std::shared_ptr<ForwardBackend> backend_;
  std::shared_ptr<const TensorParallelPlan> tp_;
  std::shared_ptr<Communicator> comm_;
};

}  // namespace tritium
