#include "engine/generator.h"

#include <algorithm>
#include <chrono>

#include "core/error.h"
#include "engine/engine.h"
#include "kv/block_allocator.h"

namespace tritium {

std::string StopStringFilter::push(const std::string& piece) {
  if (stopped_) return {};
  pending_ += piece;
  size_t cut = std::string::npos;
  for (const auto& s : stops_) {
    if (s.empty()) continue;
    size_t p = pending_.find(s);
    if (p != std::string::npos && (cut == std::string::npos || p < cut)) {
      cut = p;
      matched_ = s;
    }
  }
  if (cut != std::string::npos) {
    stopped_ = true;
    std::string out = pending_.substr(0, cut);
    pending_.clear();
    return out;
  }
  // Hold back the longest suffix that is a proper prefix of some stop string.
  size_t hold = 0;
  for (const auto& s : stops_) {
    for (size_t len = std::min(s.size() - 1, pending_.size()); len > hold; --len) {
      if (pending_.compare(pending_.size() - len, len, s, 0, len) == 0) {
        hold = len;
        break;
      }
    }
  }
  std::string out = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return out;
}

std::string StopStringFilter::flush() {
  if (stopped_) return {};
  std::string out;
  out.swap(pending_);
  return out;
}

Generator::Generator(Backend& backend, const Tokenizer& tok) : backend_(backend), tok_(tok) {}

std::vector<int32_t> Generator::encode_prompt(const std::string& text) const {
  // As Hugging Face does: the tokenizer's post-processor decides about BOS.
  return tok_.encode(text, true);
}

std::vector<int32_t> Generator::generate(const std::vector<int32_t>& prompt_ids, const GenerateOptions& opts,
                                         const std::function<void(const std::string&)>& on_text,
                                         GenerateStats* stats) {
  using clock = std::chrono::steady_clock;
  const ModelConfig& c = backend_.model().config();
  const int64_t ctx = c.max_position_embeddings;
  TRITIUM_CHECK(!prompt_ids.empty(), "empty prompt: nothing to condition on (give a prompt or enable BOS)");
  TRITIUM_CHECK(static_cast<int64_t>(prompt_ids.size()) < ctx,
                "prompt has {} tokens, which does not fit the model context of {} tokens (max_position_embeddings)",
                prompt_ids.size(), ctx);
  const int64_t total = std::min<int64_t>(ctx, static_cast<int64_t>(prompt_ids.size()) + opts.max_new_tokens);

  KvCacheSpec spec{c.num_layers, c.num_kv_heads, c.head_dim, 16, (total + 15) / 16};
  spec.dtype = opts.kv_dtype;
  if (opts.kv_scale > 0) {
    spec.quant_scale = opts.kv_scale;
  } else if (opts.kv_dtype == KvDType::kFP8E4M3 || opts.kv_dtype == KvDType::kI8) {
    if (calibrated_scale_ == 0.0f || calibrated_dtype_ != opts.kv_dtype) {
      calibrated_scale_ = calibrate_kv_scale(backend_, opts.kv_dtype, tok_.encode(kv_calibration_text(), true));
      calibrated_dtype_ = opts.kv_dtype;
    }
    spec.quant_scale = calibrated_scale_;
  }
  KvCache cache(spec);
  BlockAllocator alloc(spec.num_blocks);
  BlockTable bt;
  bt.reserve(alloc, total, spec.block_size);

  Sampler sampler(opts.sampling);
  IncrementalDecoder detok(tok_, true);
  StopStringFilter stopper(opts.stop);
  std::vector<int32_t> out;
  std::vector<float> logits;
  GenerateStats st;
  st.prompt_tokens = static_cast<int64_t>(prompt_ids.size());
  st.finish_reason = "length";

  auto t0 = clock::now();
  BatchChunk ch{prompt_ids, 0, bt.blocks, false};
  backend_.forward(std::span<const BatchChunk>(&ch, 1), cache, logits);
  auto t1 = clock::now();
  st.prefill_seconds = std::chrono::duration<double>(t1 - t0).count();

  int64_t pos = static_cast<int64_t>(prompt_ids.size());
  auto emit = [&](const std::string& s) {
    if (!s.empty() && on_text) on_text(s);
  };
  while (static_cast<int64_t>(out.size()) < opts.max_new_tokens) {
    const int32_t next = sampler.sample(logits, prompt_ids, out);
    const bool is_eos = std::find(c.eos_token_ids.begin(), c.eos_token_ids.end(), next) != c.eos_token_ids.end() ||
                        (tok_.eos_id() && *tok_.eos_id() == next);
    if (is_eos && !opts.ignore_eos) {
      st.finish_reason = "stop";
      break;
    }
    out.push_back(next);
    emit(stopper.push(detok.push(next)));
    if (stopper.stopped()) {
      st.finish_reason = "stop";
      break;
    }
    if (pos >= total || static_cast<int64_t>(out.size()) >= opts.max_new_tokens) break;
    const int32_t tok = next;
    BatchChunk d{std::span<const int32_t>(&tok, 1), pos, bt.blocks, false};
    backend_.forward(std::span<const BatchChunk>(&d, 1), cache, logits);
    ++pos;
  }
  if (!stopper.stopped()) emit(stopper.push(detok.flush()) + stopper.flush());
  st.generated_tokens = static_cast<int64_t>(out.size());
  st.decode_seconds = std::chrono::duration<double>(clock::now() - t1).count();
  if (stats) *stats = st;
  return out;
}

}  // namespace tritium
