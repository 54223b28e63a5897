#include "engine/sampler.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <unordered_map>
#include <unordered_set>

namespace tritium {

void apply_penalties(const SamplingParams& p, std::span<float> logits, std::span<const int32_t> prompt,
                     std::span<const int32_t> output) {
  const int64_t V = static_cast<int64_t>(logits.size());
  if (p.repetition_penalty != 1.0f) {
    std::unordered_set<int32_t> seen(prompt.begin(), prompt.end());
    seen.insert(output.begin(), output.end());
    for (int32_t id : seen) {
      if (id < 0 || id >= V) continue;
      float& l = logits[id];
      l = l > 0 ? l / p.repetition_penalty : l * p.repetition_penalty;
    }
  }
  if (p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f) {
    std::unordered_map<int32_t, int> count;
    for (int32_t id : output) ++count[id];
    for (auto [id, n] : count) {
      if (id < 0 || id >= V) continue;
      logits[id] -= p.presence_penalty + p.frequency_penalty * static_cast<float>(n);
    }
  }
}

float log_prob(std::span<const float> logits, int32_t id) {
  float mx = -INFINITY;
  for (float v : logits) mx = std::max(mx, v);
  double s = 0;
  for (float v : logits) s += std::exp(static_cast<double>(v - mx));
  return static_cast<float>(static_cast<double>(logits[id] - mx) - std::log(s));
}

Sampler::Sampler(const SamplingParams& p) : p_(p), rng_(p.has_seed ? p.seed : std::random_device{}()) {}

double Sampler::next_uniform() { return std::generate_canonical<double, 53>(rng_); }

int32_t Sampler::sample(std::span<float> logits, std::span<const int32_t> prompt, std::span<const int32_t> output) {
  apply_penalties(p_, logits, prompt, output);
  return sample_with_uniform(p_, logits, is_greedy(p_) ? 0.0 : next_uniform(), cand_);
}

int32_t sample_with_uniform(const SamplingParams& p, std::span<const float> logits, double u,
                            std::vector<std::pair<float, int32_t>>& cand) {
  const int32_t V = static_cast<int32_t>(logits.size());
  if (is_greedy(p)) {
    return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  }
  cand.clear();
  for (int32_t i = 0; i < V; ++i) {
    if (logits[i] > -INFINITY) cand.emplace_back(logits[i] / p.temperature, i);
  }
  if (cand.empty()) return 0;
  auto by_logit = [](const auto& a, const auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); };
  if (p.top_k > 0 && p.top_k < static_cast<int>(cand.size())) {
    std::partial_sort(cand.begin(), cand.begin() + p.top_k, cand.end(), by_logit);
    cand.resize(p.top_k);
  } else {
    std::sort(cand.begin(), cand.end(), by_logit);
  }
  // softmax over candidates (sorted descending); exp in double rounded to float, as the device computes it
  const float mx = cand[0].first;
  double sum = 0;
  for (auto& c : cand) {
    c.first = static_cast<float>(std::exp(static_cast<double>(c.first - mx)));
    sum += c.first;
  }
  for (auto& c : cand) c.first = static_cast<float>(c.first / sum);
  if (p.top_p < 1.0f) {
    double cum = 0;
    size_t keep = cand.size();
    for (size_t i = 0; i < cand.size(); ++i) {
      cum += cand[i].first;
      if (cum >= p.top_p) { keep = i + 1; break; }
    }
    cand.resize(std::max<size_t>(1, keep));
  }
  if (p.min_p > 0.0f) {
    const float thr = p.min_p * cand[0].first;
    size_t keep = 1;
    while (keep < cand.size() && cand[keep].first >= thr) ++keep;
    cand.resize(keep);
  }
  // The draw walks the kept tokens in id order (the order a parallel scan over the vocabulary gives).
  std::sort(cand.begin(), cand.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
  double total = 0;
  for (const auto& c : cand) total += c.first;
  const double r = u * total;
  double acc = 0;
  for (const auto& c : cand) {
    acc += c.first;
    if (r < acc) return c.second;
  }
  return cand.back().second;
}

bool apply_token_constraints(const TokenConstraints& c, std::span<float> logits, std::span<const int32_t> output,
                             std::span<const int32_t> stop_ids, int32_t grammar_state) {
  const float ninf = -std::numeric_limits<float>::infinity();
  const int64_t V = static_cast<int64_t>(logits.size());
  if (c.grammar) {
    const std::vector<uint64_t> m = c.grammar->mask(grammar_state);
    std::vector<std::pair<int32_t, float>> stops;
    if (c.grammar->accepting(grammar_state))
      for (int32_t t : stop_ids)
        if (t >= 0 && t < V) stops.emplace_back(t, logits[t]);
    const int64_t mv = std::min<int64_t>(V, static_cast<int64_t>(m.size()) * 64);
    for (int64_t t = 0; t < mv; ++t)
      if (!(m[static_cast<size_t>(t) / 64] >> (t % 64) & 1)) logits[t] = ninf;
    for (int64_t t = mv; t < V; ++t) logits[t] = ninf;  // ids past the tokenizer's vocabulary (padded heads)
    for (const auto& [t, v] : stops) logits[t] = v;
  }
  if (!c.allowed_token_ids.empty()) {
    std::vector<float> keep(c.allowed_token_ids.size());
    for (size_t i = 0; i < keep.size(); ++i) {
      const int32_t t = c.allowed_token_ids[i];
      keep[i] = t >= 0 && t < V ? logits[t] : ninf;
    }
    std::fill(logits.begin(), logits.end(), ninf);
    for (size_t i = 0; i < keep.size(); ++i) {
      const int32_t t = c.allowed_token_ids[i];
      if (t >= 0 && t < V) logits[t] = keep[i];
    }
  }
  for (const auto& w : c.bad_words) {
    if (w.empty()) continue;
    const size_t n = w.size() - 1;  // tokens that must precede the banned last one
    if (output.size() < n) continue;
    if (std::equal(w.begin(), w.begin() + static_cast<std::ptrdiff_t>(n), output.end() - static_cast<std::ptrdiff_t>(n)) &&
        w.back() >= 0 && w.back() < V)
      logits[w.back()] = ninf;
  }
  auto any_finite = [&] {
    for (float v : logits)
      if (v != ninf) return true;
    return false;
  };
  if (static_cast<int64_t>(output.size()) < c.min_tokens) {
    std::vector<std::pair<int32_t, float>> saved;
    for (int32_t t : stop_ids)
      if (t >= 0 && t < V) {
        saved.emplace_back(t, logits[t]);
        logits[t] = ninf;
      }
    if (!any_finite())  // only stop tokens are left: min_tokens yields (in reverse: an id listed twice was saved twice)
      for (auto it = saved.rbegin(); it != saved.rend(); ++it) logits[it->first] = it->second;
  }
  return any_finite();
}

bool token_constraint_mask(const TokenConstraints& c, int64_t V, std::span<const int32_t> output,
                           std::span<const int32_t> stop_ids, int32_t grammar_state, std::vector<uint64_t>& allow,
                           std::vector<int32_t>& banned) {
  allow.clear();
  banned.clear();
  const size_t W = static_cast<size_t>((V + 63) / 64);
  auto set = [](std::vector<uint64_t>& m, int64_t t) { m[static_cast<size_t>(t) / 64] |= uint64_t{1} << (t % 64); };
  auto has = [&](int64_t t) { return allow.empty() || (allow[static_cast<size_t>(t) / 64] >> (t % 64) & 1); };
  if (c.grammar) {
    allow = c.grammar->mask(grammar_state);
    allow.resize(W, 0);
    if (V % 64) allow[W - 1] &= (uint64_t{1} << (V % 64)) - 1;  // ids past V (a tokenizer larger than the head)
    if (c.grammar->accepting(grammar_state))
      for (int32_t t : stop_ids)
        if (t >= 0 && t < V) set(allow, t);
  }
  if (!c.allowed_token_ids.empty()) {
    std::vector<uint64_t> a(W, 0);
    for (int32_t t : c.allowed_token_ids)
      if (t >= 0 && t < V) set(a, t);
    if (allow.empty()) {
      allow = std::move(a);
    } else {
      for (size_t i = 0; i < W; ++i) allow[i] &= a[i];
    }
  }
  for (const auto& w : c.bad_words) {  // as apply_token_constraints
    if (w.empty()) continue;
    const size_t n = w.size() - 1;
    if (output.size() < n) continue;
    if (std::equal(w.begin(), w.begin() + static_cast<std::ptrdiff_t>(n), output.end() - static_cast<std::ptrdiff_t>(n)) &&
        w.back() >= 0 && w.back() < V)
      banned.push_back(w.back());
  }
  std::sort(banned.begin(), banned.end());
  banned.erase(std::unique(banned.begin(), banned.end()), banned.end());
  // Ids left: those allowed, less the allowed ones banned.
  int64_t left = V;
  if (!allow.empty()) {
    left = 0;
    for (uint64_t w : allow) left += std::popcount(w);
  }
  for (int32_t t : banned) left -= has(t);
  if (static_cast<int64_t>(output.size()) < c.min_tokens) {
    std::vector<int32_t> stops;  // stop ids still samplable
    for (int32_t t : stop_ids)
      if (t >= 0 && t < V && has(t) && !std::binary_search(banned.begin(), banned.end(), t)) stops.push_back(t);
    std::sort(stops.begin(), stops.end());
    stops.erase(std::unique(stops.begin(), stops.end()), stops.end());
    if (left > static_cast<int64_t>(stops.size())) {  // else only stop tokens are left: min_tokens yields
      left -= static_cast<int64_t>(stops.size());
      const size_t n = banned.size();
      banned.insert(banned.end(), stops.begin(), stops.end());
      std::inplace_merge(banned.begin(), banned.begin() + static_cast<std::ptrdiff_t>(n), banned.end());
    }
  }
  return left > 0;
}

}  // namespace tritium
