// The device sampler (backend/cuda/device_sampler.h, kernels/cuda/sampling.h) against the CPU sampler
// (engine/sampler.h) on random logits: for every option, allow masks included, the same logits and the same uniform
// give the same token;
// logprobs, ranks and top logprobs match the log-softmax of the raw logits; the logits are left as they were.
// Skipped (visibly) without CUDA or without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/device_sampling.h"
#include "core/error.h"
#include "engine/sampler.h"

#if TRITIUM_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "backend/cuda/device_sampler.h"
#endif

using namespace tritium;

#if TRITIUM_HAVE_CUDA

namespace {

#define REQUIRE_GPU()                                                                      \
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device (or built without CUDA)"

struct Case {
  std::string name;
  SamplingParams p;
  int logprobs = -1;
  bool penalties_lists = false;  // prompt / output ids for the penalties
  bool bans = false;
  bool mask = false;  // an allow mask (token constraints): random ids, the best one excluded, some rows short
};

std::vector<Case> cases() {
  std::vector<Case> cs;
  auto add = [&](std::string n, auto f, int lp = -1, bool lists = false, bool bans = false, bool mask = false) {
    Case c;
    c.name = std::move(n);
    f(c.p);
    c.logprobs = lp;
    c.penalties_lists = lists;
    c.bans = bans;
    c.mask = mask;
    cs.push_back(c);
  };
  add("greedy", [](SamplingParams& p) { p.temperature = 0; });
  add("greedy+logprobs5", [](SamplingParams& p) { p.temperature = 0; }, 5);
  add("top_k=1", [](SamplingParams& p) { p.top_k = 1; }, 0);
  add("temp 1", [](SamplingParams&) {});
  add("temp 0.7", [](SamplingParams& p) { p.temperature = 0.7f; });
  add("temp 1.5", [](SamplingParams& p) { p.temperature = 1.5f; }, 20);
  add("top_k 5", [](SamplingParams& p) { p.top_k = 5; });
  add("top_k 50", [](SamplingParams& p) { p.top_k = 50; p.temperature = 0.8f; });
  add("top_k 3000", [](SamplingParams& p) { p.top_k = 3000; });
  add("top_p 0.5", [](SamplingParams& p) { p.top_p = 0.5f; });
  add("top_p 0.9", [](SamplingParams& p) { p.top_p = 0.9f; p.temperature = 0.6f; });
  add("top_p 0.999", [](SamplingParams& p) { p.top_p = 0.999f; });
  add("min_p 0.05", [](SamplingParams& p) { p.min_p = 0.05f; });
  add("min_p 0.3", [](SamplingParams& p) { p.min_p = 0.3f; p.temperature = 1.2f; });
  add("top_k+top_p+min_p", [](SamplingParams& p) { p.top_k = 40; p.top_p = 0.8f; p.min_p = 0.02f; }, 3);
  add("repetition", [](SamplingParams& p) { p.repetition_penalty = 1.3f; }, -1, true);
  add("repetition greedy", [](SamplingParams& p) { p.repetition_penalty = 1.8f; p.temperature = 0; }, 2, true);
  add("presence+frequency", [](SamplingParams& p) { p.presence_penalty = 0.6f; p.frequency_penalty = 0.4f; }, -1, true);
  add("all penalties top_p", [](SamplingParams& p) {
    p.repetition_penalty = 1.1f; p.presence_penalty = -0.5f; p.frequency_penalty = 0.2f; p.top_p = 0.95f; }, 4, true);
  add("bans", [](SamplingParams& p) { p.top_k = 20; }, -1, false, true);
  add("bans greedy + penalties", [](SamplingParams& p) { p.temperature = 0; p.presence_penalty = 1.0f; }, 1, true, true);
  add("mask greedy", [](SamplingParams& p) { p.temperature = 0; }, 2, false, false, true);
  add("mask temp 1", [](SamplingParams&) {}, -1, false, false, true);
  add("mask top_k 10 + bans", [](SamplingParams& p) { p.top_k = 10; }, -1, false, true, true);
  add("mask top_p 0.9 min_p + penalties", [](SamplingParams& p) {
    p.top_p = 0.9f; p.min_p = 0.01f; p.repetition_penalty = 1.2f; }, 5, true, false, true);
  return cs;
}

// Random logits of one row; `kind` 0: normal * 3, 1: few distinct values (ties), 2: a peaked row with -inf entries.
std::vector<float> random_row(std::mt19937& rng, int V, int kind) {
  std::vector<float> l(V);
  std::normal_distribution<float> n(0.0f, 3.0f);
  for (auto& v : l) v = n(rng);
  if (kind == 1)
    for (auto& v : l) v = std::round(v * 2.0f) / 2.0f;
  if (kind == 2) {
    std::uniform_int_distribution<int> pick(0, V - 1);
    for (int i = 0; i < V / 10; ++i) l[pick(rng)] = -std::numeric_limits<float>::infinity();
    for (int i = 0; i < 5; ++i) l[pick(rng)] = 12.0f + static_cast<float>(i);
  }
  return l;
}

// The engine's reference for one row: bans -> penalties -> sample_with_uniform.
int32_t cpu_pick(const Case& c, std::vector<float> l, const std::vector<int32_t>& prompt,
                 const std::vector<int32_t>& output, const std::vector<int32_t>& banned,
                 const std::vector<uint64_t>& allow, double u) {
  if (c.mask)
    for (size_t t = 0; t < l.size(); ++t)
      if (t / 64 >= allow.size() || !(allow[t / 64] >> (t % 64) & 1)) l[t] = -std::numeric_limits<float>::infinity();
  for (int32_t t : banned) l[t] = -std::numeric_limits<float>::infinity();
  apply_penalties(c.p, l, prompt, output);
  std::vector<std::pair<float, int32_t>> scratch;
  return sample_with_uniform(c.p, l, u, scratch);
}

void run_cases(int V, int rows_per_case, uint32_t seed) {
  std::mt19937 rng(seed);
  const auto cs = cases();
  std::vector<float> logits;
  std::vector<RowSampling> rows;
  std::vector<const Case*> row_case;
  std::vector<std::vector<int32_t>> prompts, outputs, bans;
  std::vector<std::vector<uint64_t>> masks;
  std::uniform_int_distribution<int32_t> tok(0, V - 1);
  std::uniform_real_distribution<double> ud(0.0, 1.0);
  const size_t R = cs.size() * static_cast<size_t>(rows_per_case);
  prompts.resize(R), outputs.resize(R), bans.resize(R), masks.resize(R);
  for (const Case& c : cs) {
    for (int k = 0; k < rows_per_case; ++k) {
      const size_t i = rows.size();
      const auto l = random_row(rng, V, k % 3);
      logits.insert(logits.end(), l.begin(), l.end());
      if (c.penalties_lists) {
        for (int j = 0; j < 40; ++j) prompts[i].push_back(tok(rng));
        // Output ids repeat (counts > 1) and include the row's best ids, so the penalties change the pick.
        const int32_t best = static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin());
        for (int j = 0; j < 30; ++j) outputs[i].push_back(j % 3 == 0 ? best : tok(rng) % 64);
      }
      if (c.bans) {
        const int32_t best = static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin());
        bans[i] = {best, tok(rng), tok(rng), best};  // a duplicate too
      }
      if (c.mask) {
        // Every third row's mask is short (ids past it are excluded); the best id and every fourth one are out.
        const int32_t best = static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin());
        const size_t words = (static_cast<size_t>(V) + 63) / 64;
        masks[i].assign(k % 3 == 2 ? std::max<size_t>(1, words / 2) : words, 0);
        for (int32_t t = 0; t < V; ++t)
          if (t != best && (rng() % 4) != 0 && static_cast<size_t>(t) / 64 < masks[i].size())
            masks[i][static_cast<size_t>(t) / 64] |= uint64_t{1} << (t % 64);
      }
      RowSampling r;
      set_row_rule(c.p, r);
      r.uniform = ud(rng);
      r.logprobs = c.logprobs;
      rows.push_back(r);
      row_case.push_back(&c);
    }
  }
  for (size_t i = 0; i < R; ++i)
    rows[i].prompt = prompts[i], rows[i].output = outputs[i], rows[i].banned = bans[i], rows[i].allowed = masks[i];
  rows[1].active = false;  // an inactive row in the batch

  float* d = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&d), logits.size() * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(d, logits.data(), logits.size() * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
  cudaStream_t st = nullptr;
  ASSERT_EQ(cudaStreamCreate(&st), cudaSuccess);
  std::vector<SampledToken> got;
  {
    cuda_detail::DeviceSampler sampler;
    sampler.run(d, V, rows, st, got);
    // A second call on the same buffers gives the same results (the logits were restored).
    std::vector<SampledToken> again;
    sampler.run(d, V, rows, st, again);
    for (size_t i = 0; i < R; ++i) {
      if (rows[i].active) {
        EXPECT_EQ(again[i].id, got[i].id) << "row " << i;
      }
    }
  }
  std::vector<float> after(logits.size());
  ASSERT_EQ(cudaMemcpy(after.data(), d, after.size() * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(std::memcmp(after.data(), logits.data(), after.size() * sizeof(float)), 0) << "logits not restored";
  cudaStreamDestroy(st);
  cudaFree(d);

  ASSERT_EQ(got.size(), R);
  int mismatches = 0;
  for (size_t i = 0; i < R; ++i) {
    if (!rows[i].active) continue;
    const Case& c = *row_case[i];
    const std::vector<float> raw(logits.begin() + static_cast<std::ptrdiff_t>(i * V),
                                 logits.begin() + static_cast<std::ptrdiff_t>((i + 1) * V));
    const int32_t want = cpu_pick(c, raw, prompts[i], outputs[i], bans[i], masks[i], rows[i].uniform);
    if (got[i].id != want) ++mismatches;
    EXPECT_EQ(got[i].id, want) << c.name << ", row " << i << ", V " << V << ", u " << rows[i].uniform;
    if (c.logprobs < 0) continue;
    EXPECT_NEAR(got[i].logprob, log_prob(raw, got[i].id), 1e-5) << c.name;
    int rank = 1;
    for (float v : raw) rank += v > raw[got[i].id];
    EXPECT_EQ(got[i].rank, rank) << c.name;
    std::vector<int32_t> idx(V);
    for (int j = 0; j < V; ++j) idx[j] = j;
    std::stable_sort(idx.begin(), idx.end(), [&](int32_t a, int32_t b) { return raw[a] > raw[b]; });
    ASSERT_EQ(got[i].top.size(), static_cast<size_t>(c.logprobs)) << c.name;
    for (int j = 0; j < c.logprobs; ++j) {
      EXPECT_EQ(got[i].top[j].first, idx[j]) << c.name << " top " << j;
      EXPECT_NEAR(got[i].top[j].second, log_prob(raw, idx[j]), 1e-5) << c.name << " top " << j;
    }
  }
  EXPECT_EQ(mismatches, 0);
}

}  // namespace

TEST(CudaSampling, MatchesCpuSamplerEveryOptionLargeVocab) {
  REQUIRE_GPU();
  run_cases(128256, 6, 11);
}

TEST(CudaSampling, MatchesCpuSamplerEveryOptionSmallVocabs) {
  REQUIRE_GPU();
  for (int V : {1000, 4099, 32000}) run_cases(V, 9, 100 + V);
}

// The draws follow the distribution: plain sampling at temperature 1 over 4 tokens, 4000 uniforms.
TEST(CudaSampling, DrawsFollowTheDistribution) {
  REQUIRE_GPU();
  const std::vector<double> probs = {0.5, 0.3, 0.15, 0.05};
  const int R = 4000, V = 4;
  std::vector<float> logits;
  std::vector<RowSampling> rows(R);
  std::mt19937_64 rng(5);
  for (int i = 0; i < R; ++i) {
    for (double p : probs) logits.push_back(static_cast<float>(std::log(p)));
    rows[i].uniform = std::generate_canonical<double, 53>(rng);
  }
  float* d = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&d), logits.size() * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(d, logits.data(), logits.size() * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
  std::vector<SampledToken> got;
  {
    cuda_detail::DeviceSampler sampler;
    sampler.run(d, V, rows, nullptr, got);
  }
  cudaFree(d);
  std::vector<int> count(V);
  for (const auto& t : got) ++count[t.id];
  for (int v = 0; v < V; ++v) EXPECT_NEAR(count[v] / static_cast<double>(R), probs[v], 0.025) << "token " << v;
}

TEST(CudaSampling, RejectsBadRows) {
  REQUIRE_GPU();
  std::vector<RowSampling> rows(1);
  const std::vector<int32_t> bad = {7};
  rows[0].banned = bad;
  float* d = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&d), 4 * sizeof(float)), cudaSuccess);
  std::vector<SampledToken> got;
  cuda_detail::DeviceSampler sampler;
  EXPECT_THROW(sampler.run(d, 4, rows, nullptr, got), Error);
  rows[0].banned = {};
  rows[0].logprobs = kMaxDeviceTopLogprobs + 1;
  EXPECT_THROW(sampler.run(d, 4, rows, nullptr, got), Error);
  cudaFree(d);
}

#endif

// The CPU side of the device sampler's packing: penalty entries are distinct, sorted, and carry the right flags.
TEST(DeviceSampling, PenaltyEntries) {
  RowSampling r;
  const std::vector<int32_t> prompt = {5, 3, 5, 99}, output = {3, 3, 7};
  r.prompt = prompt;
  r.output = output;
  std::vector<PenaltyEntry> e;
  append_penalty_entries(r, 50, e);
  EXPECT_TRUE(e.empty());  // penalties off
  r.repetition_penalty = 1.2f;
  append_penalty_entries(r, 50, e);  // 99 is outside the vocabulary
  ASSERT_EQ(e.size(), 3u);
  EXPECT_EQ(e[0].id, 3);
  EXPECT_EQ(e[0].seen, 1);
  EXPECT_EQ(e[0].count, 0);
  EXPECT_EQ(e[1].id, 5);
  EXPECT_EQ(e[2].id, 7);
  e.clear();
  r.repetition_penalty = 1.0f;
  r.frequency_penalty = 0.5f;
  append_penalty_entries(r, 50, e);  // output ids only
  ASSERT_EQ(e.size(), 2u);
  EXPECT_EQ(e[0].id, 3);
  EXPECT_EQ(e[0].seen, 0);
  EXPECT_EQ(e[0].count, 2);
  EXPECT_EQ(e[1].id, 7);
  EXPECT_EQ(e[1].count, 1);
}
