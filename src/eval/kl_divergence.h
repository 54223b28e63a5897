// tritium eval: KL divergence of a (quantized) model's next-token distributions against a base model's,
// the llama-perplexity --kl-divergence procedure.
//
// Base file format (safetensors, written with write_safetensors):
//   "log_probs" F16 [N, vocab]  log_softmax of the base model's logits at each of the N scored positions
//   "targets"   I32 [N]         the token each position predicts (to check that both runs score the same text)
//   __metadata__: format = "tritium-kld-v1", vocab, count, plus the caller's keys (mode, ctx, text, model).
// f16 keeps log-probs to a relative 2^-11 (about 0.005 nats at -10); the base distribution is renormalized
// after reading, so a model compared with its own file gives a KLD of order 1e-6, not exactly 0.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "io/safetensors.h"

namespace tritium {

/// Collects the base model's log-probabilities of scored positions, then saves them.
class LogitsRecorder {
 public:
  /// logits: float32 [vocab] of one scored position; target: the token it predicts.
  /// Throws tritium::Error when the vocabulary size changes between calls.
  void add(std::span<const float> logits, int32_t target);
  /// Writes the file described above. Throws tritium::Error on I/O failure or when nothing was recorded.
  void save(const std::string& path, const std::map<std::string, std::string>& metadata) const;
  int64_t count() const { return static_cast<int64_t>(targets_.size()); }

 private:
  int vocab_ = 0;
  std::vector<uint16_t> log_probs_;
  std::vector<int32_t> targets_;
};

/// Summary as llama-perplexity prints it (natural logs; PPL over the same scored tokens).
struct KldResult {
  int64_t n = 0;
  double mean_kld = 0, kld_stderr = 0, max_kld = 0, median_kld = 0, p99_kld = 0;
  double ppl_base = 0, ppl = 0, dppl = 0;        ///< dppl = ppl - ppl_base
  double mean_ln_ppl_ratio = 0, ln_ppl_ratio_stderr = 0;  ///< mean of nll - nll_base
  double same_top1 = 0, same_top1_stderr = 0;   ///< fraction of positions with the same argmax token
  double rms_dp = 0;                             ///< RMS of p(target) - p_base(target)
};

/// Reads a base file and accumulates KL(P_base || P) position by position, in the order they were saved.
class KldAccumulator {
 public:
  /// Throws tritium::Error naming the file when it is not a tritium-kld-v1 file.
  explicit KldAccumulator(const std::string& base_path);
  /// The next scored position of the quantized run. Throws tritium::Error when there are more positions than
  /// the file holds, the vocabulary differs, or the target token differs from the saved one.
  void add(std::span<const float> logits, int32_t target);
  /// Throws tritium::Error when fewer positions were added than the file holds.
  KldResult finish() const;
  const nlohmann::json& metadata() const { return file_->metadata(); }
  int64_t count() const { return count_; }

 private:
  std::unique_ptr<SafetensorsFile> file_;
  const uint16_t* log_probs_ = nullptr;
  const int32_t* targets_ = nullptr;
  int64_t count_ = 0, vocab_ = 0, next_ = 0;
  std::vector<double> kld_, lp_base_, lp_, dp_;
  int64_t same_ = 0;
  std::vector<double> scratch_;
};

/// KL(P || Q) = sum_j p_j (log p_j - log q_j) for two log-probability vectors (natural log).
double kl_divergence(std::span<const double> log_p, std::span<const double> log_q);

}  // namespace tritium
