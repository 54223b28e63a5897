// tritium model: the decoder-only transformer (Llama / Qwen2 / BitNet b1.58): its configuration and weights.
//
// A Transformer is immutable once loaded. It computes nothing itself: a backend (backend/backend.h; the CPU
// forward in backend/cpu, the GPU forward in backend/cuda) runs its forward pass over a paged KV cache.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "io/model_config.h"
#include "model/embedding.h"
#include "model/linear.h"
#include "model/tp_plan.h"

namespace tritium {

/// Weights of one decoder layer. Projections are fused: qkv = [q; k; v] rows, gate_up = [gate; up] rows.
struct LayerWeights {
  std::vector<float> input_norm, post_attn_norm;  ///< [hidden]
  std::vector<float> attn_sub_norm;               ///< [hidden] (BitNet only)
  std::vector<float> ffn_sub_norm;                ///< [intermediate] (BitNet only)
  std::vector<float> q_norm, k_norm;              ///< [head_dim] (ModelConfig::qk_norm: Qwen3)
  std::unique_ptr<Linear> qkv, o, gate_up, down;
};

class Transformer {
 public:
  Transformer(ModelConfig config, Embedding embed, std::vector<LayerWeights> layers, std::vector<float> final_norm,
              std::unique_ptr<Linear> lm_head);
  /// A float32 embedding table [vocab, hidden].
  Transformer(ModelConfig config, std::shared_ptr<const std::vector<float>> embed, std::vector<LayerWeights> layers,
              std::vector<float> final_norm, std::unique_ptr<Linear> lm_head);

  const ModelConfig& config() const { return config_; }
  int vocab_size() const { return config_.vocab_size; }

  /// Keeps an object (e.g. the memory-mapped model file whose bytes packed weights borrow) alive as long as
  /// the model.
  void set_keep_alive(std::shared_ptr<const void> k) { keep_alive_ = std::move(k); }

  /// RoPE inverse frequencies [head_dim / 2], float32 as HF computes them.
  const std::vector<float>& rope_inv_freq() const { return inv_freq_; }

  /// Bytes of all weights as held (projections and head in their format, the embedding in its dtype, norms in
  /// f32; a head that shares the embedding's table counted once).
  size_t weight_bytes() const;
  /// Bytes of the projection weights read per decoded token (the decode roofline numerator), including lm_head.
  size_t weight_bytes_per_token() const;
  /// Bytes of the decoder layers' projection weights (weight_bytes_per_token() without the head).
  size_t body_bytes_per_token() const;
  const std::vector<LayerWeights>& layers() const { return layers_; }
  const Linear& lm_head() const { return *lm_head_; }
  /// The embedding table as held (bf16 in place or float32); the CPU forward looks up rows through it.
  const Embedding& embed() const { return embed_; }
  /// True when the head reads the embedding's own table (tied, float32 or bf16): one copy for both.
  bool head_shares_embedding() const;
  /// The embedding table in float32 (Embedding::f32_table: for a bf16 table a widened copy made on the first
  /// call, for consumers that need the whole float32 table: the GPU upload, tensor-parallel slicing, convert).
  const std::vector<float>& embedding() const { return *embed_.f32_table(); }
  std::shared_ptr<const std::vector<float>> embedding_shared() const { return embed_.f32_table(); }

  /// Marks this model as the shard of one tensor-parallel rank (parallel/shard.h builds it): a backend then runs
  /// the collectives the plan implies (all-reduce after row-parallel o/down, all-gathers in gather mode and for
  /// the vocabulary-parallel lm_head) and returns full logits on every rank.
  void set_tp_plan(TensorParallelPlan plan) { tp_ = std::make_shared<const TensorParallelPlan>(std::move(plan)); }
  /// The rank's plan; nullptr for an unsharded model.
  const TensorParallelPlan* tp_plan() const { return tp_ ? tp_.get() : nullptr; }
  const std::vector<float>& final_norm() const { return final_norm_; }

 private:
  ModelConfig config_;
  Embedding embed_;  ///< [vocab, hidden], its table shared with lm_head when tied
  std::vector<LayerWeights> layers_;
  std::vector<float> final_norm_;
  std::unique_ptr<Linear> lm_head_;
  std::vector<float> inv_freq_;  ///< [head_dim / 2] RoPE inverse frequencies, float32 as HF computes them
  std::shared_ptr<const void> keep_alive_;
  std::shared_ptr<const TensorParallelPlan> tp_;
};

}  // namespace tritium
