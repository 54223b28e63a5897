// tritium backend/cpu: the transformer forward pass on the host CPU (kernels/cpu), multithreaded by
// tritium::parallel_for. For a tensor-parallel shard (Transformer::tp_plan) it calls a Communicator's host
// collectives (parallel/communicator.h) and returns full logits on every rank.
#pragma once

#include <functional>
#include <memory>

#include "backend/backend.h"
#include "core/scratch.h"
#include "parallel/communicator.h"

namespace tritium {

/// Called with the input of every linear layer (for outlier analysis): layer index, projection name
/// ("qkv", "o", "gate_up", "down"), x float32 [M, K].
using ActivationObserver = std::function<void(int layer, const char* proj, const float* x, int64_t M, int64_t K)>;

class CpuBackend final : public Backend {
 public:
  /// `comm` is required when the model is a tensor-parallel shard (its rank and world must match the plan's) and
  /// ignored otherwise. Throws tritium::Error on a mismatch.
  explicit CpuBackend(std::shared_ptr<const Transformer> model, std::shared_ptr<Communicator> comm = nullptr);
  /// Borrows `model` (see borrow()).
  explicit CpuBackend(const Transformer& model, std::shared_ptr<Communicator> comm = nullptr)
      : CpuBackend(borrow(model), std::move(comm)) {}

  void forward(std::span<const BatchChunk> batch, KvCache& cache, std::vector<float>& logits) override;
  std::string name() const override { return "CPU"; }
  bool on_cpu() const override { return true; }
  /// Observes the input of every projection in later forward calls (empty: none).
  void set_activation_observer(ActivationObserver obs) { observer_ = std::move(obs); }

 private:
  void attention(const BatchChunk& c, int layer, const float* q, KvCache& cache, float* out) const;
  void observe(int layer, const char* proj, const float* x, int64_t M, int64_t K) const {
    if (observer_) observer_(layer, proj, x, M, K);
  }

  std::shared_ptr<Communicator> comm_;
  ActivationObserver observer_;
  // The activations of forward(), kept between calls (core/scratch.h): sized by the largest batch seen.
  struct Workspace {
    Scratch<float> x, cos, sin, h, qkv, q, attn, gu, act, proj, full_in, sel;
  } ws_;
};

}  // namespace tritium
