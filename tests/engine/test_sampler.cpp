// Sampling: greedy, the filters (top-k / top-p / min-p), penalties, seeds.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <random>

#include "engine/generator.h"
#include "engine/sampler.h"
#include "grammar/json_schema.h"
#include "grammar/token_grammar.h"

using namespace tritium;

namespace {
std::vector<float> logits_of(const std::vector<double>& probs) {
  std::vector<float> l;
  for (double p : probs) l.push_back(static_cast<float>(std::log(p)));
  return l;
}
std::map<int32_t, int> draw(SamplingParams p, const std::vector<float>& logits, int n) {
  p.has_seed = true;
  Sampler s(p);
  std::map<int32_t, int> c;
  for (int i = 0; i < n; ++i) {
    auto l = logits;
    ++c[s.sample(l, {}, {})];
  }
  return c;
}
}  // namespace

TEST(Sampler, GreedyPicksArgmaxLowestIdOnTies) {
  SamplingParams p;
  p.temperature = 0;
  Sampler s(p);
  std::vector<float> l = {0.1f, 2.0f, 2.0f, -1.0f};
  EXPECT_EQ(s.sample(l, {}, {}), 1);
}

TEST(Sampler, TopKTopPMinPRestrictTheSupport) {
  const auto l = logits_of({0.5, 0.3, 0.15, 0.05});
  SamplingParams p;
  p.top_k = 2;
  auto c = draw(p, l, 2000);
  EXPECT_EQ(c.count(2) + c.count(3), 0u);
  EXPECT_NEAR(c[0] / 2000.0, 0.5 / 0.8, 0.04);
  p = {};
  p.top_p = 0.7f;  // smallest prefix with mass >= 0.7: {0, 1}
  c = draw(p, l, 2000);
  EXPECT_EQ(c.count(2) + c.count(3), 0u);
  p = {};
  p.min_p = 0.2f;  // keep p >= 0.1: {0, 1, 2}
  c = draw(p, l, 3000);
  EXPECT_EQ(c.count(3), 0u);
  EXPECT_GT(c[2], 0);
  p = {};
  c = draw(p, l, 4000);  // plain sampling follows the distribution
  EXPECT_NEAR(c[3] / 4000.0, 0.05, 0.015);
}

TEST(Sampler, TemperatureSharpens) {
  const auto l = logits_of({0.6, 0.4});
  SamplingParams p;
  p.temperature = 0.25f;  // p0 ∝ 0.6^4, p1 ∝ 0.4^4 -> 0.835
  auto c = draw(p, l, 4000);
  EXPECT_NEAR(c[0] / 4000.0, std::pow(0.6, 4) / (std::pow(0.6, 4) + std::pow(0.4, 4)), 0.02);
}

TEST(Sampler, SameSeedSameDraws) {
  const auto l = logits_of({0.25, 0.25, 0.25, 0.25});
  SamplingParams p;
  p.seed = 1234;
  EXPECT_EQ(draw(p, l, 200), draw(p, l, 200));
}

TEST(Sampler, Penalties) {
  SamplingParams p;
  p.repetition_penalty = 2.0f;
  std::vector<float> l = {4.0f, -4.0f, 1.0f};
  std::vector<int32_t> prompt = {0}, out = {1};
  apply_penalties(p, l, prompt, out);
  EXPECT_EQ(l, (std::vector<float>{2.0f, -8.0f, 1.0f}));
  p = {};
  p.presence_penalty = 0.5f;
  p.frequency_penalty = 0.25f;
  l = {1.0f, 1.0f, 1.0f};
  out = {2, 2, 1};
  apply_penalties(p, l, prompt, out);
  EXPECT_EQ(l, (std::vector<float>{1.0f, 0.25f, 0.0f}));
}

TEST(StopStrings, HeldBackAcrossPiecesAndCut) {
  StopStringFilter f({"</s>", "STOP"});
  std::string out;
  out += f.push("Hello <");
  EXPECT_EQ(out, "Hello ");  // "<" could start "</s>"
  out += f.push("/x");
  EXPECT_EQ(out, "Hello </x");
  out += f.push(" ST");
  out += f.push("OP and more");
  EXPECT_TRUE(f.stopped());
  EXPECT_EQ(out, "Hello </x ");
  EXPECT_EQ(f.push("ignored"), "");
  EXPECT_EQ(f.matched(), "STOP");
}

// matched(): the stop string that starts first in the text, whatever its place in the list; at one start, the
// first listed.
TEST(StopStrings, MatchedIsTheEarliestStopString) {
  StopStringFilter f({"cd", "b", "bc"});
  EXPECT_EQ(f.matched(), "");
  EXPECT_EQ(f.push("abcd"), "a");
  EXPECT_EQ(f.matched(), "b");
  StopStringFilter g({"xyz", "bcd"});
  EXPECT_EQ(g.push("abcdxyz"), "a");
  EXPECT_EQ(g.matched(), "bcd");
}

// apply_token_constraints: allowed ids, one- and two-token bad words, min_tokens masking EOS / stop ids unless
// nothing else is left, and false when nothing can be sampled.
TEST(TokenConstraints, MasksWhatTheyForbid) {
  const float ninf = -std::numeric_limits<float>::infinity();
  std::vector<float> l = {0.f, 1.f, 2.f, 3.f, 4.f};
  TokenConstraints c;
  c.allowed_token_ids = {1, 3, 4};
  c.bad_words = {{4}, {2, 3}};
  const std::vector<int32_t> out_a = {0, 2};  // ends with 2: "2 3" bans 3
  EXPECT_TRUE(apply_token_constraints(c, l, out_a, {}));
  EXPECT_EQ(l, (std::vector<float>{ninf, 1.f, ninf, ninf, ninf}));
  l = {0.f, 1.f, 2.f, 3.f, 4.f};
  const std::vector<int32_t> out_b = {0, 1};  // does not end with 2: 3 stays
  EXPECT_TRUE(apply_token_constraints(c, l, out_b, {}));
  EXPECT_EQ(l, (std::vector<float>{ninf, 1.f, ninf, 3.f, ninf}));
  // min_tokens: stop ids masked while fewer tokens are out; kept when they are all that is left.
  TokenConstraints m;
  m.min_tokens = 3;
  l = {0.f, 1.f, 2.f};
  const std::vector<int32_t> stop = {2};
  EXPECT_TRUE(apply_token_constraints(m, l, out_b, stop));
  EXPECT_EQ(l[2], ninf);
  EXPECT_EQ(l[1], 1.f);
  m.allowed_token_ids = {2};
  l = {0.f, 1.f, 2.f};
  EXPECT_TRUE(apply_token_constraints(m, l, out_b, stop));
  EXPECT_EQ(l[2], 2.f);
  const std::vector<int32_t> three = {0, 1, 1};
  l = {0.f, 1.f, 2.f};
  m.allowed_token_ids = {};
  EXPECT_TRUE(apply_token_constraints(m, l, three, stop));
  EXPECT_EQ(l[2], 2.f);  // min_tokens reached
  TokenConstraints none;
  none.allowed_token_ids = {1};
  none.bad_words = {{1}};
  l = {0.f, 1.f, 2.f};
  EXPECT_FALSE(apply_token_constraints(none, l, out_b, {}));
}

// token_constraint_mask (what a device sampler applies: an allow mask and banned ids) against
// apply_token_constraints on random constraints: a grammar at states along random outputs, allow lists, bad words,
// min_tokens with stop ids, a head wider than the tokenizer (V not a multiple of 64): the same logits remain, and
// both agree when no token is left.
TEST(TokenConstraints, DeviceMaskMatchesTheLogitsMask) {
  const float ninf = -std::numeric_limits<float>::infinity();
  std::vector<std::string> bytes = {"", "", ""};  // 0..2: special tokens (BOS, EOS, a stop id)
  for (char ch = 'a'; ch <= 'f'; ++ch) bytes.emplace_back(1, ch);
  for (char ch = '0'; ch <= '9'; ++ch) bytes.emplace_back(1, ch);
  for (const char* t : {" ", ".", "ab", "ba", "abc", " 1", " 12", "0.", "c.", "fa", " a", ".."}) bytes.emplace_back(t);
  auto vocab = std::make_shared<grammar::Vocabulary>(bytes);
  grammar::TokenGrammar g(grammar::compile_regex("[a-c]+( [0-9]+)?\\."), vocab);
  std::mt19937 rng(3);
  const int64_t V = vocab->size() + 37;
  std::uniform_int_distribution<int32_t> any(0, static_cast<int32_t>(V) - 1);
  std::normal_distribution<float> nd(0.0f, 2.0f);
  int compared = 0, empty = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    TokenConstraints c;
    std::vector<int32_t> output;
    int32_t state = -1;
    if (trial % 3 != 0) {  // a grammar, at the state after a random allowed output
      c.grammar = std::shared_ptr<grammar::TokenGrammar>(&g, [](grammar::TokenGrammar*) {});
      state = g.start();
      const int steps = static_cast<int>(rng() % 6);
      for (int k = 0; k < steps; ++k) {
        const auto m = g.mask(state);
        std::vector<int32_t> ok;
        for (int32_t t = 0; t < vocab->size(); ++t)
          if (m[static_cast<size_t>(t) / 64] >> (t % 64) & 1) ok.push_back(t);
        if (ok.empty()) break;
        const int32_t t = ok[rng() % ok.size()];
        output.push_back(t);
        state = g.advance(state, vocab->bytes(t));
      }
    } else {
      for (int k = static_cast<int>(rng() % 4); k > 0; --k) output.push_back(any(rng));
    }
    if (rng() % 2) {
      for (int k = static_cast<int>(rng() % 12); k >= 0; --k) c.allowed_token_ids.push_back(any(rng));
      if (rng() % 4 == 0) c.allowed_token_ids.push_back(static_cast<int32_t>(V) + 5);  // outside: ignored
    }
    if (rng() % 2) {
      c.bad_words.push_back({any(rng)});
      if (!output.empty()) c.bad_words.push_back({output.back(), any(rng)});
      c.bad_words.push_back({});
    }
    if (rng() % 2) c.min_tokens = static_cast<int64_t>(rng() % 6);
    const std::vector<int32_t> stop_ids = {1, 2, 2, static_cast<int32_t>(V) + 1};
    std::vector<float> logits(static_cast<size_t>(V));
    for (auto& v : logits) v = nd(rng);

    std::vector<float> want = logits;
    const bool ok_want = apply_token_constraints(c, want, output, stop_ids, state);
    std::vector<uint64_t> allow;
    std::vector<int32_t> banned;
    const bool ok_got = token_constraint_mask(c, V, output, stop_ids, state, allow, banned);
    ASSERT_EQ(ok_got, ok_want) << "trial " << trial;
    if (!ok_want) {
      ++empty;
      continue;
    }
    ASSERT_TRUE(std::is_sorted(banned.begin(), banned.end()));
    ASSERT_TRUE(std::adjacent_find(banned.begin(), banned.end()) == banned.end());
    std::vector<float> got = logits;
    for (int64_t t = 0; t < V; ++t) {
      const bool in = allow.empty() || (static_cast<size_t>(t) / 64 < allow.size() &&
                                        (allow[static_cast<size_t>(t) / 64] >> (t % 64) & 1));
      if (!in) got[static_cast<size_t>(t)] = ninf;
    }
    for (int32_t t : banned) {
      ASSERT_TRUE(t >= 0 && t < V);
      got[static_cast<size_t>(t)] = ninf;
    }
    ASSERT_EQ(got, want) << "trial " << trial;
    ++compared;
  }
  EXPECT_GT(compared, 2000);
  EXPECT_GT(empty, 10);  // the "no token left" case was exercised
}
