// tritium model: the linear (projection) layers a transformer is made of, one interface for every weight format.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <span>

#include "quant/int8_projection.h"
#include "formats/q4_rows.h"
#include "formats/q6_rows.h"
#include "formats/ternary_format.h"

namespace tritium {

/// y [M, N] = x [M, K] @ W^T (+ bias), float32 in and out, whatever W's storage.
class Linear {
 public:
  virtual ~Linear() = default;
  int64_t in_features() const { return k_; }
  int64_t out_features() const { return n_; }
  /// x: [M, K] f32, y: [M, N] f32. row_begin: first row of each request in the flattened batch (empty = one
  /// request). Row m of y depends only on the rows of its own request (batch invariance); formats whose
  /// statistics span rows (LLM.int8() outlier columns, per-tensor activation scales) compute them per request.
  virtual void forward(const float* x, int64_t M, float* y, std::span<const int64_t> row_begin = {}) const = 0;
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
  void forward(const float* x, int64_t M, float* y, std::span<const int64_t> row_begin = {}) const override;
  size_t weight_bytes() const override { return w_->size() * sizeof(float); }
  std::string format_name() const override { return "f32"; }
  const std::vector<float>& weight() const { return *w_; }
  const std::vector<float>& bias() const { return bias_; }

 private:
  std::shared_ptr<const std::vector<float>> w_;
  std::vector<float> bias_;
};

/// Bfloat16 weights [N, K] used as stored (borrowed from the memory-mapped file, or owned by `owner`), no bias:
/// the output head `--lm-head bf16`. Results are bit for bit those of a FloatLinear over the widened weights
/// (kernels/cpu/gemm_bf16.h) at half its memory. A tied head shares the embedding's bf16 table.
class Bf16Linear final : public Linear {
 public:
  /// w: bf16 bit patterns [n, k], valid as long as `owner` (or, when owner is null, the model's memory-mapped file).
  Bf16Linear(const uint16_t* w, int64_t n, int64_t k, std::shared_ptr<const void> owner = {});
  void forward(const float* x, int64_t M, float* y, std::span<const int64_t> row_begin = {}) const override;
  size_t weight_bytes() const override { return static_cast<size_t>(n_ * k_) * 2; }
  std::string format_name() const override { return "bf16"; }
  const uint16_t* data() const { return w_; }

 private:
  const uint16_t* w_;
  std::shared_ptr<const void> owner_;
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
  /// Per-row, per-group-of-128-along-K scales (Ternary Bonsai, post-training-quantized models): group_scales
  /// [N, ceil(K/128)] row-major, held in the GEMM's tile-major layout (kernels/cpu/ternary_kernels.h) as fp16
  /// when every scale is exactly an fp16 value (GGUF Q2_0's scales are: half the memory), else as float32.
  TernaryLinear(std::unique_ptr<PackedTernary> w, std::vector<float> group_scales);
  void forward(const float* x, int64_t M, float* y, std::span<const int64_t> row_begin = {}) const override;
  size_t weight_bytes() const override { return w_->bytes(); }
  std::string format_name() const override;
  const PackedTernary& packed() const { return *w_; }
  const std::vector<Segment>& segments() const { return segments_; }
  /// The per-group scales [N, ceil(K/128)] row-major (a copy); empty unless the layer has them.
  std::vector<float> group_scales() const;
  bool has_group_scales() const { return !tile_scales_.empty() || !tile_scales_f16_.empty(); }
  /// Bytes of the group scales as held (2 or 4 per scale; 0 without them).
  size_t group_scale_bytes() const { return tile_scales_.size() * 4 + tile_scales_f16_.size() * 2; }
  /// Adds a float bias [N] to the outputs (Qwen2's q/k/v bias after ternary PTQ).
  void set_bias(std::vector<float> bias);
  const std::vector<float>& bias() const { return bias_; }

 private:
  std::unique_ptr<PackedTernary> w_;
  std::vector<Segment> segments_;
  std::vector<float> tile_scales_;         ///< the group scales tile-major (ternary_gemm_f32's layout), or
  std::vector<uint16_t> tile_scales_f16_;  ///< the same as fp16 bit patterns when all are exact in fp16
  std::vector<float> bias_;
};

/// An int8-quantized linear (absmax / zero-point / row-wise / vector-wise / LLM.int8() / weight-only), see
/// src/quant/int8_projection.h for the exact arithmetic of each method.
class Int8Linear final : public Linear {
 public:
  explicit Int8Linear(Int8Projection impl);
  void forward(const float* x, int64_t M, float* y, std::span<const int64_t> row_begin = {}) const override;
  size_t weight_bytes() const override;
  std::string format_name() const override;
  const Int8Projection& impl() const { return impl_; }

 private:
  Int8Projection impl_;
};

/// 4-bit row-grouped weights (src/formats/q4_rows.h), used for the output head (`--lm-head q4`): activations
/// quantized per token to int8 by absmax (as TernaryLinear), exact int32 group sums, fp32 scaling.
class Q4Linear final : public Linear {
 public:
  /// Throws tritium::Error when the buffers do not match the shape.
  explicit Q4Linear(Q4Rows w);
  void forward(const float* x, int64_t M, float* y, std::span<const int64_t> row_begin = {}) const override;
  size_t weight_bytes() const override { return w_.bytes(); }
  std::string format_name() const override { return "q4"; }
  const Q4Rows& weights() const { return w_; }

 private:
  Q4Rows w_;
};

/// 6-bit row-grouped weights (src/formats/q6_rows.h), used for the output head (`--lm-head q6`): activations
/// quantized per token to int8 by absmax (as TernaryLinear), exact int32 group sums, fp32 scaling.
class Q6Linear final : public Linear {
 public:
  /// Throws tritium::Error when the buffers do not match the shape.
  explicit Q6Linear(Q6Rows w);
  void forward(const float* x, int64_t M, float* y, std::span<const int64_t> row_begin = {}) const override;
  size_t weight_bytes() const override { return w_.bytes(); }
  std::string format_name() const override { return "q6"; }
  const Q6Rows& weights() const { return w_; }

 private:
  Q6Rows w_;
};

}  // namespace tritium
