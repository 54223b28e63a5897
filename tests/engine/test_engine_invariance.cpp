// Serving engine on tiny-bitnet: batch invariance (a request's greedy output does not depend on what runs beside
// it, on prefix caching, on chunked prefill or on preemption), request features (stop strings/tokens, seeds,
// logprobs, abort, limits) and KV accounting; the same on the CUDA backend (sampling on the device), where the
// device sampler must also pick what the CPU sampler picks from the same logits. The CUDA tests skip without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <thread>

#include "core/parallel.h"
#include "backend/cuda/cuda_backend.h"
#include "model/loader.h"
#include "engine/engine.h"
#include "engine/generator.h"
#include "grammar/json_schema.h"
#include "grammar/token_grammar.h"
#include "server/structured_output.h"
#include "test_util.h"

using namespace tritium;

namespace {

using test::OneThread;

struct Loaded {
  std::unique_ptr<Transformer> model;
  std::shared_ptr<Backend> be;  // the CPU backend of model
  std::unique_ptr<Tokenizer> tok;
};

const Loaded& bitnet() {
  static Loaded l = [] {
    Loaded x;
    x.model = load_transformer(test::bundled_model());
    x.be = std::make_shared<CpuBackend>(*x.model);
    x.tok = Tokenizer::from_file(test::bundled_model() + "/tokenizer.json");
    return x;
  }();
  return l;
}

// tiny-bitnet on the CUDA backend, loaded per test (a CUDA backend held in a static would be destroyed after the
// CUDA runtime at exit); nullptr without a GPU.
std::unique_ptr<Loaded> bitnet_cuda() {
  if (cuda_device_count() == 0) return nullptr;
  auto x = std::make_unique<Loaded>();
  x->model = load_transformer(test::bundled_model());
  x->be = make_cuda_backend(*x->model);
  x->tok = Tokenizer::from_file(test::bundled_model() + "/tokenizer.json");
  return x;
}

#define REQUIRE_CUDA_MODEL(m)                                                      \
  const auto m##_p = bitnet_cuda();                                                 \
  if (!m##_p) GTEST_SKIP() << "no CUDA device (or built without CUDA)";            \
  const Loaded& m = *m##_p

// A backend that runs `inner`'s forward and leaves sampling to the host: the engine's CPU sampling path over
// the very logits the device sampler sees.
class HostSampled final : public Backend {
 public:
  explicit HostSampled(std::shared_ptr<Backend> inner) : Backend(borrow(inner->model())), inner_(std::move(inner)) {}
  void forward(std::span<const BatchChunk> batch, KvCache& cache, std::vector<float>& logits) override {
    inner_->forward(batch, cache, logits);
  }
  std::string name() const override { return inner_->name() + " (host sampling)"; }

 private:
  std::shared_ptr<Backend> inner_;
};

// 16 prompts of varied lengths; several share a long common prefix (prefix cache hits).
std::vector<std::vector<int32_t>> make_prompts(const Tokenizer& tok, int n) {
  std::vector<std::vector<int32_t>> out;
  const std::string shared =
      "The old man sat by the fire and told the children a story about the sea and the ships that sailed upon it";
  const char* tails[] = {"Once upon a time", " in the morning", "Holmes said, \"Watson", " and then",
                         "The Time Traveller", " It was a dark and stormy night; the rain fell in torrents",
                         "Chapter", " He looked at me"};
  std::mt19937 rng(7);
  for (int i = 0; i < n; ++i) {
    std::string text = (i % 3 == 0) ? shared + std::string(tails[i % 8]) : std::string(tails[i % 8]);
    if (i % 4 == 1) text += " " + std::string(tails[(i + 3) % 8]) + " " + shared;
    auto ids = tok.encode(text, true);
    if (i % 5 == 4) {  // a random-token prompt of 40..90 tokens
      std::uniform_int_distribution<int32_t> d(2, 8000);
      const int len = 40 + i * 3;
      for (int k = 0; k < len; ++k) ids.push_back(d(rng));
    }
    out.push_back(ids);
  }
  return out;
}

EngineRequest greedy(const std::vector<int32_t>& prompt, int max_tokens) {
  EngineRequest r;
  r.prompt = prompt;
  r.sampling.temperature = 0;
  r.max_tokens = max_tokens;
  r.ignore_eos = true;
  return r;
}

std::vector<std::vector<int32_t>> run_all(const Loaded& m, EngineConfig cfg,
                                          const std::vector<std::vector<int32_t>>& prompts, int max_tokens,
                                          EngineMetrics* metrics = nullptr) {
  Engine eng(*m.be, *m.tok, cfg);
  std::vector<std::shared_ptr<RequestHandle>> hs;
  for (const auto& p : prompts) hs.push_back(eng.add_request(greedy(p, max_tokens)));
  eng.run_until_idle();
  std::vector<std::vector<int32_t>> out;
  for (auto& h : hs) {
    RequestOutput o = h->wait_all();
    EXPECT_EQ(o.finish_reason, "length");
    out.push_back(o.token_ids);
  }
  EXPECT_EQ(eng.metrics().kv_cache_usage_perc, 0.0);
  if (metrics) *metrics = eng.metrics();
  return out;
}

EngineConfig small_cfg() {
  EngineConfig c;
  c.num_blocks = 256;
  c.max_num_seqs = 16;
  c.max_num_batched_tokens = 256;
  return c;
}

}  // namespace

// The model itself: a chunk's logits are bitwise the same alone, beside other chunks, and when its prefill is
// split into pieces.
TEST(EngineBatchInvariance, ModelLogitsIndependentOfBatch) {
  OneThread one;
  const Loaded& m = bitnet();
  const ModelConfig& c = m.model->config();
  auto prompts = make_prompts(*m.tok, 4);
  KvCacheSpec spec{c.num_layers, c.num_kv_heads, c.head_dim, 16, 64};
  auto table = [](int first, int n) {
    std::vector<int32_t> t(n);
    for (int i = 0; i < n; ++i) t[i] = first + i;
    return t;
  };
  const int V = c.vocab_size;
  // Alone.
  KvCache c1(spec);
  auto t0 = table(0, 16);
  std::vector<float> alone;
  BatchChunk ch{prompts[0], 0, t0, true};
  m.be->forward(std::span<const BatchChunk>(&ch, 1), c1, alone);
  // Beside three others, and split into two chunks (the second in a batch of its own with others).
  KvCache c2(spec);
  std::vector<std::vector<int32_t>> tabs = {table(16, 16), t0, table(32, 16), table(48, 16)};
  const size_t half = prompts[0].size() / 2;
  std::vector<BatchChunk> b1 = {{prompts[1], 0, tabs[0], false},
                                {std::span<const int32_t>(prompts[0]).first(half), 0, tabs[1], true},
                                {prompts[2], 0, tabs[2], true}};
  std::vector<float> l1, l2;
  m.be->forward(b1, c2, l1);
  std::vector<BatchChunk> b2 = {{prompts[3], 0, tabs[3], false},
                                {std::span<const int32_t>(prompts[0]).subspan(half), static_cast<int64_t>(half), tabs[1], true}};
  m.be->forward(b2, c2, l2);
  // l1 rows: 1 (prompts[1] last) + half (prompts[0] first half) + ...; l2 rows: 1 + rest.
  for (size_t t = 0; t < prompts[0].size(); ++t) {
    const float* want = &alone[t * V];
    const float* got = t < half ? &l1[(1 + t) * V] : &l2[(1 + t - half) * V];
    for (int v = 0; v < V; ++v) ASSERT_EQ(want[v], got[v]) << "position " << t << " vocab " << v;
  }
}

namespace {

// Greedy output of each request alone (and through the single-request Generator) equals its output among all the
// others with prefix caching on, with caching off and a small token budget (more prefill chunking), and under
// forced preemption.
void check_greedy_invariance(const Loaded& m, const char* what, KvDType kv = KvDType::kF32) {
  auto cfg_of = [&] {
    EngineConfig c = small_cfg();
    c.kv_dtype = kv;
    return c;
  };
  const int n = 16;
  const int max_tokens = test::under_sanitizer() ? 4 : 16;
  auto prompts = make_prompts(*m.tok, n);
  std::vector<std::vector<int32_t>> alone;
  for (const auto& p : prompts) alone.push_back(run_all(m, cfg_of(), {p}, max_tokens)[0]);
  {
    Generator gen(*m.be, *m.tok);
    GenerateOptions go;
    go.max_new_tokens = max_tokens;
    go.sampling.temperature = 0;
    go.ignore_eos = true;
    go.kv_dtype = kv;
    EXPECT_EQ(gen.generate(prompts[0], go, nullptr, nullptr), alone[0]) << what;
  }
  EngineMetrics mt;
  auto concurrent = run_all(m, cfg_of(), prompts, max_tokens, &mt);
  EXPECT_GT(mt.prefix_cache_hits_total, 0);
  for (int i = 0; i < n; ++i) EXPECT_EQ(concurrent[i], alone[i]) << what << ", request " << i << " (prefix caching on)";
  // The same requests again on that engine's kind of cache: served from cached prefixes, same output.
  auto twice = run_all(m, cfg_of(), [&] { auto d = prompts; d.insert(d.end(), prompts.begin(), prompts.end()); return d; }(),
                       max_tokens);
  for (int i = 0; i < 2 * n; ++i) EXPECT_EQ(twice[i], alone[i % n]) << what << ", request " << i << " (repeated)";
  EngineConfig off = cfg_of();
  off.enable_prefix_caching = false;
  off.max_num_batched_tokens = 37;
  auto no_cache = run_all(m, off, prompts, max_tokens, &mt);
  EXPECT_EQ(mt.prefix_cache_hits_total, 0);
  for (int i = 0; i < n; ++i) EXPECT_EQ(no_cache[i], alone[i]) << what << ", request " << i << " (prefix caching off)";
  EngineConfig tiny = cfg_of();
  tiny.num_blocks = 14;  // 224 token slots for 16 requests
  auto preempted = run_all(m, tiny, prompts, max_tokens, &mt);
  EXPECT_GT(mt.num_preemptions_total, 0);
  for (int i = 0; i < n; ++i) EXPECT_EQ(preempted[i], alone[i]) << what << ", request " << i << " (preemption)";
}

}  // namespace

TEST(EngineBatchInvariance, GreedyAloneVsConcurrentPrefixCachingAndPreemption) {
  OneThread one;
  check_greedy_invariance(bitnet(), "tiny-bitnet");
}

TEST(EngineBatchInvariance, GreedyAloneVsConcurrentPrefixCachingAndPreemptionCuda) {
  REQUIRE_CUDA_MODEL(m);
  ASSERT_TRUE(m.be->samples_on_device());
  check_greedy_invariance(m, "tiny-bitnet cuda");
  check_greedy_invariance(m, "tiny-bitnet cuda, bf16 KV", KvDType::kBF16);
}

// Quantization methods whose activation statistics span rows (per-tensor absmax, zero-point, LLM.int8()'s outlier
// columns) take them per statistic segment of the sequence (backend/backend.h), so they are as invariant.
TEST(EngineBatchInvariance, Int8MethodsWithCrossRowStatisticsAreInvariant) {
  REQUIRE_SHARED_DATA(s);
  OneThread one;
  for (const char* method : {"int8-absmax", "int8-zeropoint", "llm-int8"}) {
    Loaded q;
    LoadOptions lo;
    lo.quant = method;
    q.model = load_transformer(s + "/models/tiny-qwen2", lo);
    q.be = std::make_shared<CpuBackend>(*q.model);
    q.tok = Tokenizer::from_file(s + "/models/tiny-qwen2/tokenizer.json");
    check_greedy_invariance(q, method);
    if (test::under_sanitizer()) break;  // one method is enough there
  }
}

namespace {
void check_seed_reproducible(const Loaded& m) {
  auto prompts = make_prompts(*m.tok, 6);
  auto sampled = [&](bool batched) {
    Engine eng(*m.be, *m.tok, small_cfg());
    std::vector<std::shared_ptr<RequestHandle>> hs;
    for (size_t i = 0; i < prompts.size(); ++i) {
      if (!batched && i > 0) break;
      EngineRequest r;
      r.prompt = prompts[i];
      r.max_tokens = 16;
      r.ignore_eos = true;
      r.sampling.temperature = 0.9f;
      r.sampling.top_p = 0.95f;
      r.sampling.top_k = 50;
      r.sampling.presence_penalty = 0.5f;
      r.sampling.frequency_penalty = 0.3f;
      r.sampling.seed = 1234 + i;
      r.sampling.has_seed = true;
      hs.push_back(eng.add_request(r));
    }
    eng.run_until_idle();
    return hs[0]->wait_all().token_ids;
  };
  const auto a = sampled(false), b = sampled(true), c = sampled(false);
  EXPECT_EQ(a, c);
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.size(), 16u);
}
}  // namespace

TEST(EngineRequests, SeedReproducibleUnderBatching) {
  OneThread one;
  check_seed_reproducible(bitnet());
}

TEST(EngineRequests, SeedReproducibleUnderBatchingCuda) {
  REQUIRE_CUDA_MODEL(m);
  check_seed_reproducible(m);
}

// Every sampling option, penalties, token constraints (bad words, min_tokens, output grammars, allowed_token_ids:
// masks applied on the device) and logprobs, 15 requests at once: sampled on the device they give the tokens (and
// logprobs) the CPU sampler gives from the same device logits; a request whose constraints leave no token ends with
// "error" on both paths and its batch mates carry on.
TEST(EngineRequests, DeviceSamplingMatchesHostSamplingCuda) {
  REQUIRE_CUDA_MODEL(m);
  auto prompts = make_prompts(*m.tok, 15);
  const auto vocab = server::make_vocabulary(*m.tok);
  auto regex = std::make_shared<grammar::TokenGrammar>(grammar::compile_regex("[a-z]+( [a-z]+){2,5}\\."), vocab);
  auto choice = std::make_shared<grammar::TokenGrammar>(
      grammar::compile_choice({"Holmes", "Watson", "Moriarty", "Mrs Hudson"}), vocab);
  std::vector<EngineRequest> reqs;
  for (size_t i = 0; i < prompts.size(); ++i) {
    EngineRequest r;
    r.prompt = prompts[i];
    r.max_tokens = 12;
    r.ignore_eos = i % 2 == 0;
    SamplingParams& p = r.sampling;
    p.seed = 77 + i;
    p.has_seed = true;
    switch (i % 6) {
      case 0: p.temperature = 0.8f; break;
      case 1: p.top_k = 20; p.top_p = 0.9f; break;
      case 2: p.min_p = 0.1f; p.temperature = 1.3f; r.logprobs = 3; break;
      case 3: p.repetition_penalty = 1.3f; p.presence_penalty = 0.4f; p.frequency_penalty = 0.3f; break;
      case 4: p.temperature = 0; r.logprobs = 0; r.constraints.bad_words = {{prompts[i][1]}, {13, 11}}; break;
      case 5: p.top_p = 0.8f; r.constraints.min_tokens = 6; break;
    }
    if (i == 12) r.constraints.grammar = regex, r.ignore_eos = false, r.max_tokens = 24;       // sampled at 1.0
    if (i == 13) r.constraints.grammar = choice, r.ignore_eos = false, p.temperature = 0.0f;  // greedy
    if (i == 14) r.constraints.allowed_token_ids = {5}, r.constraints.bad_words = {{5}};       // nothing left
    reqs.push_back(r);
  }
  auto run = [&](Backend& be, bool with_allowed) {
    Engine eng(be, *m.tok, small_cfg());
    std::vector<std::shared_ptr<RequestHandle>> hs;
    for (auto r : reqs) hs.push_back(eng.add_request(r));
    if (with_allowed) {  // a request with an allow list joins midway
      for (int k = 0; k < 4; ++k) eng.step();
      EngineRequest a = reqs[0];
      a.constraints.allowed_token_ids = {5, 6, 7, 100, 200};
      hs.push_back(eng.add_request(a));
    }
    eng.run_until_idle();
    std::vector<RequestOutput> outs;
    for (auto& h : hs) outs.push_back(h->wait_all());
    return outs;
  };
  HostSampled host(m.be);
  ASSERT_FALSE(host.samples_on_device());
  for (bool with_allowed : {false, true}) {
    const auto dev = run(*m.be, with_allowed), ref = run(host, with_allowed);
    ASSERT_EQ(dev.size(), ref.size());
    for (size_t i = 0; i < dev.size(); ++i) {
      EXPECT_EQ(dev[i].token_ids, ref[i].token_ids) << "request " << i;
      EXPECT_EQ(dev[i].finish_reason, ref[i].finish_reason) << "request " << i;
      ASSERT_EQ(dev[i].logprobs.size(), ref[i].logprobs.size()) << "request " << i;
      for (size_t t = 0; t < dev[i].logprobs.size(); ++t) {
        const TokenLogprob &a = dev[i].logprobs[t], &b = ref[i].logprobs[t];
        EXPECT_EQ(a.id, b.id);
        EXPECT_EQ(a.rank, b.rank);
        EXPECT_NEAR(a.logprob, b.logprob, 1e-5);
        ASSERT_EQ(a.top.size(), b.top.size());
        for (size_t j = 0; j < a.top.size(); ++j) {
          EXPECT_EQ(a.top[j].first, b.top[j].first);
          EXPECT_NEAR(a.top[j].second, b.top[j].second, 1e-5);
        }
      }
    }
    // The constraints held: min_tokens kept EOS out of the first 6 tokens; the one-token bad word never came.
    for (size_t i = 0; i < reqs.size(); ++i) {
      if (i % 6 == 4) {
        for (int32_t t : dev[i].token_ids) EXPECT_NE(t, prompts[i][1]);
      }
      if (i % 6 == 5) {
        EXPECT_GE(dev[i].token_ids.size(), 6u);
      }
    }
    if (with_allowed) {
      for (int32_t t : dev.back().token_ids) EXPECT_TRUE(t == 5 || t == 6 || t == 7 || t == 100 || t == 200) << t;
    }
    EXPECT_EQ(dev[14].finish_reason, "error");
    EXPECT_TRUE(dev[14].token_ids.empty());
    // The grammars held on the device: lowercase words ending in a period, and one of the four names.
    const std::string& words = dev[12].text;
    EXPECT_EQ(dev[12].finish_reason, words.size() > 0 && words.back() == '.' ? "stop" : "length") << words;
    for (char ch : words) EXPECT_TRUE((ch >= 'a' && ch <= 'z') || ch == ' ' || ch == '.') << words;
    EXPECT_TRUE(dev[13].text == "Holmes" || dev[13].text == "Watson" || dev[13].text == "Moriarty" ||
                dev[13].text == "Mrs Hudson")
        << dev[13].text;
  }
}

TEST(EngineRequests, StopStringsStopTokensAndLength) {
  OneThread one;
  const Loaded& m = bitnet();
  Engine eng(*m.be, *m.tok, small_cfg());
  const auto prompt = m.tok->encode("Once upon a time", true);
  auto full = eng.add_request(greedy(prompt, 20));
  eng.run_until_idle();
  RequestOutput f = full->wait_all();
  ASSERT_EQ(f.token_ids.size(), 20u);
  EXPECT_EQ(f.completion_tokens, 20);
  EXPECT_EQ(f.prompt_tokens, static_cast<int64_t>(prompt.size()));
  EXPECT_EQ(f.text, m.tok->decode(f.token_ids, true));

  // Stop token: the 5th generated token.
  EngineRequest st = greedy(prompt, 20);
  st.stop_token_ids = {f.token_ids[4]};
  auto h1 = eng.add_request(st);
  // Stop string: a piece of the text after the first few characters.
  const std::string stop = f.text.substr(f.text.size() / 2, 3);
  EngineRequest ss = greedy(prompt, 20);
  ss.stop = {stop};
  auto h2 = eng.add_request(ss);
  eng.run_until_idle();
  RequestOutput o1 = h1->wait_all();
  EXPECT_EQ(o1.finish_reason, "stop");
  size_t first = 0;
  while (f.token_ids[first] != f.token_ids[4]) ++first;
  EXPECT_EQ(o1.token_ids.size(), first + 1);
  EXPECT_EQ(o1.text, m.tok->decode(std::vector<int32_t>(f.token_ids.begin(), f.token_ids.begin() + first), true));
  RequestOutput o2 = h2->wait_all();
  EXPECT_EQ(o2.finish_reason, "stop");
  EXPECT_EQ(o2.text, f.text.substr(0, f.text.find(stop)));
  EXPECT_EQ(eng.metrics().kv_cache_usage_perc, 0.0);
}

TEST(EngineRequests, LogprobsMatchLogSoftmax) {
  OneThread one;
  const Loaded& m = bitnet();
  Engine eng(*m.be, *m.tok, small_cfg());
  const auto prompt = m.tok->encode("Holmes said", true);
  EngineRequest r = greedy(prompt, 3);
  r.logprobs = 5;
  auto h = eng.add_request(r);
  eng.run_until_idle();
  RequestOutput o = h->wait_all();
  ASSERT_EQ(o.logprobs.size(), 3u);
  // First token: recompute the logits directly.
  const ModelConfig& c = m.model->config();
  KvCacheSpec spec{c.num_layers, c.num_kv_heads, c.head_dim, 16, 8};
  KvCache cache(spec);
  std::vector<int32_t> table = {0, 1, 2, 3, 4, 5, 6, 7};
  std::vector<float> logits;
  BatchChunk ch{prompt, 0, table, false};
  m.be->forward(std::span<const BatchChunk>(&ch, 1), cache, logits);
  const TokenLogprob& lp = o.logprobs[0];
  EXPECT_EQ(lp.id, o.token_ids[0]);
  EXPECT_NEAR(lp.logprob, log_prob(logits, lp.id), 1e-4);
  ASSERT_EQ(lp.top.size(), 5u);
  EXPECT_EQ(lp.top[0].first, lp.id);  // greedy picks the best
  for (size_t i = 1; i < lp.top.size(); ++i) EXPECT_LE(lp.top[i].second, lp.top[i - 1].second);
  for (const auto& [id, v] : lp.top) EXPECT_NEAR(v, log_prob(logits, id), 1e-4);
}

TEST(EngineRequests, AbortFreesBlocksAndLimitsAreChecked) {
  OneThread one;
  const Loaded& m = bitnet();
  EngineConfig cfg = small_cfg();
  Engine eng(*m.be, *m.tok, cfg);
  const auto prompt = m.tok->encode("It was a dark and stormy night", true);
  auto h = eng.add_request(greedy(prompt, 200));
  for (int i = 0; i < 3; ++i) eng.step();
  EXPECT_GT(eng.metrics().kv_cache_usage_perc, 0.0);
  eng.abort(h->id());
  eng.step();
  EXPECT_EQ(eng.metrics().kv_cache_usage_perc, 0.0);
  RequestOutput o = h->wait_all();
  EXPECT_EQ(o.finish_reason, "abort");
  EXPECT_EQ(eng.num_unfinished(), 0);
  EXPECT_EQ(eng.metrics().request_success_total.at("abort"), 1);

  const int64_t ctx = m.model->config().max_position_embeddings;
  try {
    eng.add_request(greedy(prompt, ctx));
    FAIL() << "expected a context length error";
  } catch (const RequestError& e) {
    EXPECT_EQ(e.kind(), RequestError::Kind::kTooLong);
    EXPECT_NE(std::string(e.what()).find("maximum context length is 1024"), std::string::npos) << e.what();
  }
  EXPECT_THROW(eng.add_request(greedy({}, 4)), RequestError);
  EXPECT_THROW(eng.add_request(greedy({1, 99999}, 4)), RequestError);
  EXPECT_THROW(eng.add_request(greedy(prompt, -1)), RequestError);
  {  // max_tokens 0: the prompt is computed, nothing is sampled
    auto h0 = eng.add_request(greedy(prompt, 0));
    for (int i = 0; i < 4 && eng.num_unfinished() > 0; ++i) eng.step();
    RequestOutput o = h0->wait_all();
    EXPECT_EQ(o.finish_reason, "length");
    EXPECT_EQ(o.completion_tokens, 0);
    EXPECT_TRUE(o.token_ids.empty());
  }
  eng.drain();
  try {
    eng.add_request(greedy(prompt, 4));
    FAIL();
  } catch (const RequestError& e) {
    EXPECT_EQ(e.kind(), RequestError::Kind::kUnavailable);
  }
}

TEST(EngineRequests, BackgroundLoopServesConcurrentClients) {
  OneThread one;
  const Loaded& m = bitnet();
  Engine eng(*m.be, *m.tok, small_cfg());
  eng.start();
  auto prompts = make_prompts(*m.tok, 8);
  std::vector<std::vector<int32_t>> got(prompts.size());
  std::vector<std::thread> th;
  for (size_t i = 0; i < prompts.size(); ++i)
    th.emplace_back([&, i] { got[i] = eng.add_request(greedy(prompts[i], 8))->wait_all().token_ids; });
  for (auto& t : th) t.join();
  eng.stop();
  auto ref = run_all(m, small_cfg(), prompts, 8);
  EXPECT_EQ(got, ref);
}

// With the background loop, the events reach the streams from the output thread: stop() returns only after the
// final events of the requests it aborts were pushed, and once no request is unfinished the gauges say so too.
TEST(EngineRequests, BackgroundLoopDeliversEveryEventBeforeStopReturns) {
  OneThread one;
  const Loaded& m = bitnet();
  Engine eng(*m.be, *m.tok, small_cfg());
  eng.start();
  auto prompts = make_prompts(*m.tok, 4);
  std::vector<std::shared_ptr<RequestHandle>> hs;
  for (const auto& p : prompts) hs.push_back(eng.add_request(greedy(p, 6)));
  for (auto& h : hs) EXPECT_EQ(h->wait_all().finish_reason, "length");
  while (eng.num_unfinished() > 0) std::this_thread::yield();
  EXPECT_EQ(eng.metrics().num_requests_running, 0);
  EXPECT_EQ(eng.metrics().kv_cache_usage_perc, 0.0);

  auto longer = eng.add_request(greedy(prompts[0], 500));
  RequestOutput ev;
  ASSERT_TRUE(longer->next(ev, std::chrono::milliseconds(30000)));  // running
  eng.stop();
  RequestOutput all;
  while (longer->next(ev, std::chrono::milliseconds(0))) append_output(all, std::move(ev));
  EXPECT_TRUE(all.finished);
  EXPECT_EQ(all.finish_reason, "abort");
  EXPECT_EQ(eng.num_unfinished(), 0);
}

TEST(EngineKvDtypes, QuantizedCachesRunAndStayClose) {
  OneThread one;
  const Loaded& m = bitnet();
  const auto prompt = m.tok->encode("The old man sat by the fire and told the children a story", true);
  std::vector<int32_t> ref;
  for (KvDType t : {KvDType::kF32, KvDType::kF16, KvDType::kBF16, KvDType::kFP8E4M3, KvDType::kI8}) {
    EngineConfig cfg = small_cfg();
    cfg.kv_dtype = t;
    Engine eng(*m.be, *m.tok, cfg);
    if (t == KvDType::kFP8E4M3 || t == KvDType::kI8) {
      EXPECT_NE(eng.kv_spec().quant_scale, 1.0f);
    }
    auto h = eng.add_request(greedy(prompt, 8));
    eng.run_until_idle();
    auto ids = h->wait_all().token_ids;
    ASSERT_EQ(ids.size(), 8u) << kv_dtype_name(t);
    if (t == KvDType::kF32) ref = ids;
    // The first greedy token agrees in every dtype on this prompt.
    EXPECT_EQ(ids[0], ref[0]) << kv_dtype_name(t);
  }
}
