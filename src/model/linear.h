// tritium model: the linear (projection) layers a transformer is made of, one interface for every weight format.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "quant/ternary_format.h"

namespace tritium {

/// y [M, N] = x [M, K] @ W^T (+ bias), float32 in and out, whatever W's storage.
class Linear {
 public:
  virtual ~Linear() = default;
  int64_t in_features() const { return k_; }
  int64_t out_features() const { return n_; }
  /// x: [M, K] f32, y: [M, N] f32. Row m of y depends only on row m of x (batch invariance).
  virtual void forward(const float* x, int64_t M, float* y) const = 0;
  /// Bytes of weight storage (excluding scales and bias).
  virtual size_t weight_bytes() const = 0;
  /// A short name of the storage ("f32", "ternary-i2", ...).
  virtual std::string format_name() const = 0;

 protected:
  Linear(int64_t n, int64_t k) : n_(n), k_(k) {}
  int64_t n_, k_;
};

/// Float32 weights [N, K] (converted from bf16/fp16/fp32 checkpoints) with an optional bias [N].
class FloatLinear final : public Linear {
 public:
  FloatLinear(std::vector<float> w, std::vector<float> bias, int64_t n, int64_t k);
  /// Shares weights with another owner (tied embeddings: lm_head and the embedding table).
  FloatLinear(std::shared_ptr<const std::vector<float>> w, std::vector<float> bias, int64_t n, int64_t k);
  void forward(const float* x, int64_t M, float* y) const override;
  size_t weight_bytes() const override { return w_->size() * sizeof(float); }
  std::string format_name() const override { return "f32"; }
  const std::vector<float>& weight() const { return *w_; }
  const std::vector<float>& bias() const { return bias_; }

 private:
  std::shared_ptr<const std::vector<float>> w_;
  std::vector<float> bias_;
};

/// BitNet b1.58 linear (W1.58A8): activations quantized per token to int8 by absmax
/// (s = 127 / max|x|, round half to even, clamp [-128, 127]), multiplied with ternary weights with int32
/// accumulation, then y = acc / s * scale. Rows may be split into segments with their own scale (a fused
/// q|k|v or gate|up projection keeps each original projection's weight_scale).
class TernaryLinear final : public Linear {
 public:
  struct Segment {
    int64_t rows;
    float scale;  ///< multiplier applied to that segment's outputs
  };
  TernaryLinear(std::unique_ptr<PackedTernary> w, std::vector<Segment> segments);
  void forward(const float* x, int64_t M, float* y) const override;
  size_t weight_bytes() const override { return w_->bytes(); }
  std::string format_name() const override;
  const PackedTernary& packed() const { return *w_; }
  const std::vector<Segment>& segments() const { return segments_; }

 private:
  std::unique_ptr<PackedTernary> w_;
  std::vector<Segment> segments_;
};

}  // namespace tritium
