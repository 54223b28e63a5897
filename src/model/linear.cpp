#include "model/linear.h"

#include <algorithm>

#include "core/dtype.h"
#include "core/error.h"
#include "core/scratch.h"
#include "kernels/cpu/gemm_bf16.h"
#include "kernels/cpu/gemm_f32.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/q4_gemm.h"
#include "kernels/cpu/q6_gemm.h"
#include "kernels/cpu/ternary_kernels.h"

namespace tritium {
namespace {

// x [M, K] quantized per row to int8 by absmax (BitNet's activation quantization), in the calling thread's scratch:
// valid until its next quantize_rows.
struct QuantizedRows {
  const int8_t* x;
  const float* inv_s;
};

QuantizedRows quantize_rows(const float* x, int64_t M, int64_t K) {
  thread_local Scratch<int8_t> xq;
  thread_local Scratch<float> inv_s;
  int8_t* q = xq.get(static_cast<size_t>(M * K));
  float* s = inv_s.get(static_cast<size_t>(M));
  cpu::quantize_rows_absmax_i8(x, M, K, q, s);
  return {q, s};
}

}  // namespace

FloatLinear::FloatLinear(std::vector<float> w, std::vector<float> bias, int64_t n, int64_t k)
    : FloatLinear(std::make_shared<const std::vector<float>>(std::move(w)), std::move(bias), n, k) {}

FloatLinear::FloatLinear(std::shared_ptr<const std::vector<float>> w, std::vector<float> bias, int64_t n, int64_t k)
    : Linear(n, k), w_(std::move(w)), bias_(std::move(bias)) {
  TRITIUM_CHECK(static_cast<int64_t>(w_->size()) == n * k, "FloatLinear: weight size {} != {} x {}", w_->size(), n,
                k);
  TRITIUM_CHECK(bias_.empty() || static_cast<int64_t>(bias_.size()) == n, "FloatLinear: bias size {} != {}",
                bias_.size(), n);
}

void FloatLinear::forward(const float* x, int64_t M, float* y, std::span<const int64_t>) const {
  cpu::gemm_f32(x, w_->data(), bias_.empty() ? nullptr : bias_.data(), y, M, n_, k_);
}

Bf16Linear::Bf16Linear(const uint16_t* w, int64_t n, int64_t k, std::shared_ptr<const void> owner)
    : Linear(n, k), w_(w), owner_(std::move(owner)) {
  TRITIUM_CHECK(w_ && n > 0 && k > 0, "Bf16Linear: [{}, {}] weights have no data", n, k);
}

void Bf16Linear::forward(const float* x, int64_t M, float* y, std::span<const int64_t>) const {
  cpu::gemm_bf16w(x, w_, nullptr, y, M, n_, k_);
}

TernaryLinear::TernaryLinear(std::unique_ptr<PackedTernary> w, std::vector<Segment> segments)
    : Linear(w->rows(), w->cols()), w_(std::move(w)), segments_(std::move(segments)) {
  int64_t total = 0;
  for (const auto& s : segments_) total += s.rows;
  TRITIUM_CHECK(total == n_, "TernaryLinear: segments cover {} rows, weight has {}", total, n_);
}

TernaryLinear::TernaryLinear(std::unique_ptr<PackedTernary> w, std::vector<float> group_scales)
    : Linear(w->rows(), w->cols()), w_(std::move(w)) {
  TRITIUM_CHECK(static_cast<int64_t>(group_scales.size()) == n_ * w_->groups(),
                "TernaryLinear: {} group scales, expected {} x {}", group_scales.size(), n_, w_->groups());
  const bool f16 = std::all_of(group_scales.begin(), group_scales.end(), [](float v) {
    const uint16_t h = f32_to_f16(v);
    return (h & 0x7C00) != 0x7C00 && f16_to_f32(h) == v;  // finite and exact
  });
  if (!f16) {
    tile_scales_ = cpu::tile_group_scales(group_scales.data(), n_, w_->groups());
    return;
  }
  const int64_t G = w_->groups();
  tile_scales_f16_.assign(static_cast<size_t>((n_ + 15) / 16 * G * 16), 0);  // rows past N: zero
  for (int64_t r = 0; r < n_; ++r)
    for (int64_t g = 0; g < G; ++g)
      tile_scales_f16_[static_cast<size_t>(((r / 16) * G + g) * 16 + r % 16)] =
          f32_to_f16(group_scales[static_cast<size_t>(r * G + g)]);
}

std::vector<float> TernaryLinear::group_scales() const {
  if (!tile_scales_f16_.empty()) {
    std::vector<float> tiled(tile_scales_f16_.size());
    for (size_t i = 0; i < tiled.size(); ++i) tiled[i] = f16_to_f32(tile_scales_f16_[i]);
    return cpu::row_group_scales(tiled.data(), n_, w_->groups());
  }
  if (tile_scales_.empty()) return {};
  return cpu::row_group_scales(tile_scales_.data(), n_, w_->groups());
}

std::string TernaryLinear::format_name() const { return "ternary-" + std::string(ternary_format_name(w_->format())); }

void TernaryLinear::forward(const float* x, int64_t M, float* y, std::span<const int64_t>) const {
  const QuantizedRows q = quantize_rows(x, M, k_);
  if (has_group_scales()) {
    if (!tile_scales_f16_.empty()) cpu::ternary_gemm_f32(*w_, q.x, q.inv_s, M, tile_scales_f16_.data(), y);
    else cpu::ternary_gemm_f32(*w_, q.x, q.inv_s, M, tile_scales_.data(), y);
    if (!bias_.empty())
      for (int64_t m = 0; m < M; ++m)
        for (int64_t n = 0; n < n_; ++n) y[m * n_ + n] += bias_[n];
    return;
  }
  thread_local Scratch<int32_t> acc_buf;
  int32_t* acc = acc_buf.get(static_cast<size_t>(M * n_));
  cpu::ternary_gemm_i32(*w_, q.x, M, acc);
  for (int64_t m = 0; m < M; ++m) {
    int64_t n = 0;
    for (const auto& seg : segments_) {
      for (int64_t e = n + seg.rows; n < e; ++n)
        y[m * n_ + n] = (static_cast<float>(acc[m * n_ + n]) * q.inv_s[m]) * seg.scale;
    }
    if (!bias_.empty())
      for (int64_t n = 0; n < n_; ++n) y[m * n_ + n] += bias_[n];
  }
}

void TernaryLinear::set_bias(std::vector<float> bias) {
  TRITIUM_CHECK(bias.empty() || static_cast<int64_t>(bias.size()) == n_, "TernaryLinear: bias size {} != {}",
                bias.size(), n_);
  bias_ = std::move(bias);
}

}  // namespace tritium

namespace tritium {

Int8Linear::Int8Linear(Int8Projection impl)
    : Linear(impl.out_features(), impl.in_features()), impl_(std::move(impl)) {}

void Int8Linear::forward(const float* x, int64_t M, float* y, std::span<const int64_t> row_begin) const {
  impl_.forward(x, M, y, row_begin);
}

size_t Int8Linear::weight_bytes() const { return impl_.weight().bytes(); }

std::string Int8Linear::format_name() const { return std::string(int8_method_name(impl_.method())); }

}  // namespace tritium

namespace tritium {

Q4Linear::Q4Linear(Q4Rows w) : Linear(w.n, w.k), w_(std::move(w)) { validate_q4_rows(w_, "Q4Linear"); }

void Q4Linear::forward(const float* x, int64_t M, float* y, std::span<const int64_t>) const {
  const QuantizedRows q = quantize_rows(x, M, k_);
  q4_gemm(w_, q.x, q.inv_s, M, y);
}

}  // namespace tritium

namespace tritium {

Q6Linear::Q6Linear(Q6Rows w) : Linear(w.n, w.k), w_(std::move(w)) { validate_q6_rows(w_, "Q6Linear"); }

void Q6Linear::forward(const float* x, int64_t M, float* y, std::span<const int64_t>) const {
  const QuantizedRows q = quantize_rows(x, M, k_);
  q6_gemm(w_, q.x, q.inv_s, M, y);
}

}  // namespace tritium
