// tritium engine: single-request text generation (prefill + decode with a KV cache), used by
// `tritium generate` / `chat` / `bench`. The serving engine batches many requests instead.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "engine/sampler.h"
#include "tokenizer/tokenizer.h"

namespace tritium {

struct GenerateOptions {
  int max_new_tokens = 128;
  SamplingParams sampling;
  std::vector<std::string> stop;  ///< stop strings (not included in the output)
  bool ignore_eos = false;
  KvDType kv_dtype = KvDType::kF32;
  float kv_scale = 0.0f;  ///< fp8 / int8 per-tensor KV scale; 0 = calibrated once per Generator (calibrate_kv_scale)
};

struct GenerateStats {
  int64_t prompt_tokens = 0;
  int64_t generated_tokens = 0;
  double prefill_seconds = 0;
  double decode_seconds = 0;  ///< time for generated_tokens - 1 decode steps (the first token comes from prefill)
  std::string finish_reason;  ///< "stop" (EOS or stop string) or "length"
};

/// Runs one generation. Prompt ids come from the caller (tokenized with or without BOS, or a rendered chat).
class Generator {
 public:
  Generator(Backend& backend, const Tokenizer& tok);

  /// Generates up to opts.max_new_tokens tokens after `prompt_ids`; calls on_text with each new piece of text
  /// (complete UTF-8, stop strings held back and removed). Returns the generated ids.
  /// Throws tritium::Error when the prompt is empty or longer than the model context.
  std::vector<int32_t> generate(const std::vector<int32_t>& prompt_ids, const GenerateOptions& opts,
                                const std::function<void(const std::string&)>& on_text, GenerateStats* stats);

  /// Tokenizes a plain-text prompt as HF does (add_special_tokens=True: the tokenizer's post-processor decides
  /// about BOS). Throws tritium::Error on invalid UTF-8.
  std::vector<int32_t> encode_prompt(const std::string& text) const;

 private:
  Backend& backend_;
  const Tokenizer& tok_;
  KvDType calibrated_dtype_ = KvDType::kF32;
  float calibrated_scale_ = 0.0f;  ///< calibrate_kv_scale of calibrated_dtype_ (0: none yet)
};

/// Streams text while holding back any suffix that could begin a stop string. Push pieces; returns what is safe to
/// emit. stopped() turns true once a stop string appeared (text from it on is dropped); matched() is that stop
/// string (the one that starts first in the text; of those starting at the same place, the first listed).
class StopStringFilter {
 public:
  explicit StopStringFilter(std::vector<std::string> stops) : stops_(std::move(stops)) {}
  std::string push(const std::string& piece);
  std::string flush();
  bool stopped() const { return stopped_; }
  const std::string& matched() const { return matched_; }

 private:
  std::vector<std::string> stops_;
  std::string pending_, matched_;
  bool stopped_ = false;
};

}  // namespace tritium
