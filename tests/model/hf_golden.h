// Test helpers for the transformers goldens of tests/data/golden/<name>.json / .logits.safetensors (written by
// tools/make_fixture_models.py): per prompt, input_ids, 24 greedy ids, the reference's top-1 / top-2 gap at each
// greedy step, the mean NLL of prompt + continuation, and the logits of every prompt position.
#pragma once

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "kv/block_allocator.h"
#include "test_util.h"

namespace tritium::test {

inline std::string fixture_model(const std::string& name) { return data_dir() + "/models/" + name; }
inline std::string golden_base(const std::string& name) { return data_dir() + "/golden/" + name; }

inline nlohmann::json hf_golden(const std::string& name) {
  std::ifstream in(golden_base(name) + ".json");
  return nlohmann::json::parse(in);
}

inline std::string fmt_gap(double gap) {
  char b[64];
  std::snprintf(b, sizeof(b), ", then a reference top-2 gap of %.4f", gap);
  return b;
}

// Mean NLL of tokens[1:] given their prefixes (one prefill of the whole sequence), as the golden's
// sequence_mean_nll over prompt + greedy continuation.
inline double sequence_mean_nll(Backend& be, const std::vector<int32_t>& tokens) {
  const std::vector<float> lg = prompt_logits(be, tokens);
  const int V = be.model().vocab_size();
  double sum = 0;
  for (size_t t = 0; t + 1 < tokens.size(); ++t) {
    const float* row = &lg[t * V];
    const float mx = *std::max_element(row, row + V);
    double z = 0;
    for (int v = 0; v < V; ++v) z += std::exp(static_cast<double>(row[v]) - mx);
    sum += -(static_cast<double>(row[tokens[t + 1]]) - mx - std::log(z));
  }
  return sum / static_cast<double>(tokens.size() - 1);
}

// The exact rule (a model whose reference computes as tritium does): every prompt position's argmax equals the
// golden's, logits within `tol`, greedy ids equal up to the first step the reference itself calls a near tie
// (top-2 gap under 1e-3).
inline void expect_matches_golden(Backend& be, const std::string& name, double tol = 2e-3) {
  const nlohmann::json g = hf_golden(name);
  auto ref = WeightStore::from_file(golden_base(name) + ".logits.safetensors");
  const int V = be.model().vocab_size();
  for (size_t i = 0; i < g["prompts"].size(); ++i) {
    const nlohmann::json& p = g["prompts"][i];
    const auto ids = p["input_ids"].get<std::vector<int32_t>>();
    const std::vector<float> logits = prompt_logits(be, ids);
    const std::vector<float> want = tensor_to_f32(ref->get("logits_" + std::to_string(i)));
    ASSERT_EQ(logits.size(), want.size());
    double max_d = 0;
    for (size_t k = 0; k < want.size(); ++k) max_d = std::max(max_d, static_cast<double>(std::fabs(logits[k] - want[k])));
    for (size_t t = 0; t < ids.size(); ++t)
      EXPECT_EQ(argmax_of(&logits[t * V], V), argmax_of(&want[t * V], V)) << name << " prompt " << i << " position " << t;
    EXPECT_LE(max_d, tol) << name << " prompt " << i;
    const auto want_ids = p["greedy_ids"].get<std::vector<int32_t>>();
    const auto gaps = p["greedy_top2_gap"].get<std::vector<double>>();
    const std::vector<int32_t> got = greedy_ids(be, ids, static_cast<int>(want_ids.size()));
    size_t checked = 0;
    for (; checked < want_ids.size() && gaps[checked] >= 1e-3; ++checked)
      ASSERT_EQ(got[checked], want_ids[checked]) << name << " prompt " << i << " step " << checked;
    std::printf("  %s prompt %zu: %zu tokens, max |dlogit| %.3g, %zu/%zu greedy ids compared and equal\n",
                name.c_str(), i, ids.size(), max_d, checked, want_ids.size());
  }
}

// The rule for ternary weights whose reference computes in 16-bit activations (TriLM, Ternary Bonsai's unpacked
// checkpoints) while tritium quantizes activations to int8 as BitNet does: the perplexity over all prompts +
// continuations (token-weighted) within `ppl_tol` (relative) of the reference's, and greedy decoding (teacher-forced along the golden
// continuation) leaves the golden only where the reference's top-2 gap at that step is below the largest logit
// error of the prompts (a near tie for this arithmetic). Returns the number of prompts greedy-equal throughout.
inline int expect_matches_golden_16bit_reference(Backend& be, const std::string& name, double ppl_tol = 0.005) {
  const nlohmann::json g = hf_golden(name);
  auto ref = WeightStore::from_file(golden_base(name) + ".logits.safetensors");
  const int V = be.model().vocab_size();
  double err = 0;
  for (size_t i = 0; i < g["prompts"].size(); ++i) {
    const auto ids = g["prompts"][i]["input_ids"].get<std::vector<int32_t>>();
    const std::vector<float> logits = prompt_logits(be, ids);
    const std::vector<float> want = tensor_to_f32(ref->get("logits_" + std::to_string(i)));
    for (size_t k = 0; k < want.size(); ++k) err = std::max(err, static_cast<double>(std::fabs(logits[k] - want[k])));
  }
  int equal = 0;
  double sum_nll = 0, sum_ref = 0, count = 0;
  for (size_t i = 0; i < g["prompts"].size(); ++i) {
    const nlohmann::json& p = g["prompts"][i];
    const auto prompt = p["input_ids"].get<std::vector<int32_t>>();
    const auto want_ids = p["greedy_ids"].get<std::vector<int32_t>>();
    const auto gaps = p["greedy_top2_gap"].get<std::vector<double>>();
    std::vector<int32_t> seq = prompt;
    seq.insert(seq.end(), want_ids.begin(), want_ids.end());
    const double nll = sequence_mean_nll(be, seq), ref_nll = p["sequence_mean_nll"].get<double>();
    const double rel = std::exp(nll - ref_nll) - 1.0;
    const double n = static_cast<double>(seq.size() - 1);
    sum_nll += nll * n;
    sum_ref += ref_nll * n;
    count += n;
    const std::vector<float> lg = prompt_logits(be, seq);
    size_t step = 0;
    for (; step < want_ids.size(); ++step) {
      const float* row = &lg[(prompt.size() - 1 + step) * V];
      if (argmax_of(row, V) != want_ids[step]) break;
    }
    if (step == want_ids.size()) ++equal;
    else EXPECT_LT(gaps[step], err) << name << " prompt " << i << " leaves the golden at step " << step;
    std::printf("  %s prompt %zu: ppl %.4f vs reference %.4f (%+.3f%%), greedy equal for %zu/%zu steps%s "
                "(max |dlogit| %.3g)\n",
                name.c_str(), i, std::exp(nll), std::exp(ref_nll), 100 * rel, step, want_ids.size(),
                step < want_ids.size() ? fmt_gap(gaps[step]).c_str() : "", err);
  }
  const double ppl = std::exp(sum_nll / count), ref_ppl = std::exp(sum_ref / count);
  std::printf("  %s: perplexity over %.0f tokens %.4f vs reference %.4f (%+.3f%%)\n", name.c_str(), count, ppl,
              ref_ppl, 100 * (ppl / ref_ppl - 1));
  EXPECT_LE(std::fabs(ppl / ref_ppl - 1), ppl_tol) << name;
  return equal;
}

}  // namespace tritium::test
