#include "eval/kl_divergence.h"

#include <algorithm>
#include <cmath>

#include "core/dtype.h"
#include "core/error.h"
#include "eval/metrics.h"

namespace tritium {

namespace {

// log_softmax in double of float logits.
void log_softmax(std::span<const float> logits, std::vector<double>& out) {
  out.resize(logits.size());
  double mx = -INFINITY;
  for (float v : logits) mx = std::max(mx, static_cast<double>(v));
  double s = 0;
  for (float v : logits) s += std::exp(static_cast<double>(v) - mx);
  const double lse = mx + std::log(s);
  for (size_t i = 0; i < logits.size(); ++i) out[i] = static_cast<double>(logits[i]) - lse;
}

size_t argmax(std::span<const double> x) {
  return static_cast<size_t>(std::max_element(x.begin(), x.end()) - x.begin());
}

double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(pos);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (pos - static_cast<double>(lo)) * (v[hi] - v[lo]);
}

}  // namespace

double kl_divergence(std::span<const double> log_p, std::span<const double> log_q) {
  TRITIUM_CHECK(log_p.size() == log_q.size(), "kl_divergence: sizes {} and {} differ", log_p.size(), log_q.size());
  double kl = 0;
  for (size_t i = 0; i < log_p.size(); ++i) {
    const double p = std::exp(log_p[i]);
    if (p > 0) kl += p * (log_p[i] - log_q[i]);
  }
  return std::max(kl, 0.0);
}

void LogitsRecorder::add(std::span<const float> logits, int32_t target) {
  if (vocab_ == 0) vocab_ = static_cast<int>(logits.size());
  TRITIUM_CHECK(static_cast<int>(logits.size()) == vocab_, "save logits: vocabulary {} changed to {}", vocab_,
                logits.size());
  TRITIUM_CHECK(target >= 0 && target < vocab_, "save logits: target {} outside the vocabulary", target);
  std::vector<double> lp;
  log_softmax(logits, lp);
  for (double v : lp) log_probs_.push_back(f32_to_f16(static_cast<float>(v)));
  targets_.push_back(target);
}

void LogitsRecorder::save(const std::string& path, const std::map<std::string, std::string>& metadata) const {
  TRITIUM_CHECK(!targets_.empty(), "{}: no scored positions to save", path);
  std::map<std::string, std::string> meta = metadata;
  meta["format"] = "tritium-kld-v1";
  meta["vocab"] = std::to_string(vocab_);
  meta["count"] = std::to_string(targets_.size());
  const int64_t n = count();
  // I32 before F16 (decreasing element size) keeps both tensors aligned in the mapped file.
  write_safetensors(path,
                    {{"targets", DType::I32, {n}, targets_.data(), targets_.size() * sizeof(int32_t)},
                     {"log_probs", DType::F16, {n, vocab_}, log_probs_.data(), log_probs_.size() * sizeof(uint16_t)}},
                    meta);
}

KldAccumulator::KldAccumulator(const std::string& base_path)
    : file_(std::make_unique<SafetensorsFile>(base_path)) {
  const auto& m = file_->metadata();
  TRITIUM_CHECK(m.is_object() && m.value("format", "") == "tritium-kld-v1",
                "{}: not a tritium KL-divergence base file (metadata format != tritium-kld-v1)", base_path);
  const TensorView* lp = file_->find("log_probs");
  const TensorView* tg = file_->find("targets");
  TRITIUM_CHECK(lp && tg, "{}: needs tensors 'log_probs' and 'targets'", base_path);
  TRITIUM_CHECK(lp->dtype == DType::F16 && lp->shape.size() == 2, "{}: 'log_probs' must be F16 [N, vocab]",
                base_path);
  TRITIUM_CHECK(tg->dtype == DType::I32 && tg->shape.size() == 1 && tg->shape[0] == lp->shape[0],
                "{}: 'targets' must be I32 [N] with N = {}", base_path, lp->shape[0]);
  count_ = lp->shape[0];
  vocab_ = lp->shape[1];
  TRITIUM_CHECK(vocab_ > 0, "{}: empty vocabulary", base_path);
  // The data section of the mapped file starts 8-byte aligned; check each tensor's alignment before the casts.
  TRITIUM_CHECK(reinterpret_cast<uintptr_t>(lp->data) % alignof(uint16_t) == 0 &&
                    reinterpret_cast<uintptr_t>(tg->data) % alignof(int32_t) == 0,
                "{}: misaligned tensors (write 'targets' before 'log_probs')", base_path);
  log_probs_ = reinterpret_cast<const uint16_t*>(lp->data);
  targets_ = reinterpret_cast<const int32_t*>(tg->data);
}

void KldAccumulator::add(std::span<const float> logits, int32_t target) {
  TRITIUM_CHECK(next_ < count_, "{}: the run scores more positions than the {} saved (different text or settings)",
                file_->path(), count_);
  TRITIUM_CHECK(static_cast<int64_t>(logits.size()) == vocab_, "{}: vocabulary {} but the model has {}",
                file_->path(), vocab_, logits.size());
  TRITIUM_CHECK(targets_[next_] == target,
                "{}: position {} predicts token {} but the base run saved {} (different text, tokenizer or settings)",
                file_->path(), next_, target, targets_[next_]);
  const uint16_t* row = log_probs_ + next_ * vocab_;
  std::vector<double> base(static_cast<size_t>(vocab_));
  double mx = -INFINITY;
  for (int64_t j = 0; j < vocab_; ++j) {
    base[j] = f16_to_f32(row[j]);
    mx = std::max(mx, base[j]);
  }
  double s = 0;
  for (double v : base) s += std::exp(v - mx);
  const double lse = mx + std::log(s);
  for (double& v : base) v -= lse;
  log_softmax(logits, scratch_);
  kld_.push_back(kl_divergence(base, scratch_));
  lp_base_.push_back(base[target]);
  lp_.push_back(scratch_[target]);
  dp_.push_back(std::exp(scratch_[target]) - std::exp(base[target]));
  same_ += argmax(base) == argmax(scratch_);
  ++next_;
}

KldResult KldAccumulator::finish() const {
  TRITIUM_CHECK(next_ == count_, "{}: the run scored {} positions but the base run saved {}", file_->path(), next_,
                count_);
  KldResult r;
  r.n = count_;
  r.mean_kld = sample_mean(kld_);
  r.kld_stderr = stderr_of_mean(kld_);
  r.max_kld = *std::max_element(kld_.begin(), kld_.end());
  r.median_kld = quantile(kld_, 0.5);
  r.p99_kld = quantile(kld_, 0.99);
  r.ppl_base = std::exp(-sample_mean(lp_base_));
  r.ppl = std::exp(-sample_mean(lp_));
  r.dppl = r.ppl - r.ppl_base;
  std::vector<double> ratio(lp_.size());
  for (size_t i = 0; i < lp_.size(); ++i) ratio[i] = lp_base_[i] - lp_[i];
  r.mean_ln_ppl_ratio = sample_mean(ratio);
  r.ln_ppl_ratio_stderr = stderr_of_mean(ratio);
  // Recompute the same-top-1 indicator's stderr from the count (p (1-p) / (n-1)).
  const double p = static_cast<double>(same_) / static_cast<double>(count_);
  r.same_top1 = p;
  r.same_top1_stderr = count_ > 1 ? std::sqrt(p * (1 - p) / static_cast<double>(count_ - 1)) : 0;
  double ss = 0;
  for (double d : dp_) ss += d * d;
  r.rms_dp = std::sqrt(ss / static_cast<double>(dp_.size()));
  return r;
}

}  // namespace tritium
