// Tensor parallelism, CPU proof: a model is sharded for world = 2 (and 3 on a model with 3 KV heads) and the
// shards run in threads of one process with in-process collectives (make_local_group). Logits and greedy
// continuations are compared with the unsharded model: bit-identical for BitNet (gather mode: the sub-norm and
// the int8 absmax see the full row, o/down replicated) and within float summation-order tolerance for float models
// (row-parallel o/down with an all-reduce of partial sums).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <thread>

#include "core/error.h"
#include "core/parallel.h"
#include "model/loader.h"
#include "parallel/shard.h"
#include "test_util.h"

using namespace tritium;

namespace {

using test::OneThread;

KvCacheSpec spec_of(const Transformer& m, int64_t blocks) {
  const ModelConfig& c = m.config();
  return KvCacheSpec{c.num_layers, c.num_kv_heads, c.head_dim, 16, blocks};
}

/// The shards of a group and their caches; step() runs one batch on every rank (one thread each) and returns the
/// logits of rank 0 after checking that every rank returned the same bits.
struct Group {
  std::vector<std::shared_ptr<Backend>> shards;  // the CPU backend of each rank's shard
  std::vector<std::unique_ptr<KvCache>> caches;
  Group(const Transformer& full, int world, int64_t blocks) {
    auto comms = make_local_group(world);
    for (int r = 0; r < world; ++r) {
      shards.push_back(std::make_shared<CpuBackend>(std::shared_ptr<const Transformer>(shard_transformer(full, r, world)),
                                                    comms[r]));
      caches.push_back(std::make_unique<KvCache>(spec_of(shards.back()->model(), blocks)));
    }
  }
  std::vector<float> step(std::span<const BatchChunk> batch) {
    const int w = static_cast<int>(shards.size());
    std::vector<std::vector<float>> out(w);
    std::vector<std::thread> th;
    for (int r = 0; r < w; ++r) th.emplace_back([&, r] { shards[r]->forward(batch, *caches[r], out[r]); });
    for (auto& t : th) t.join();
    for (int r = 1; r < w; ++r) EXPECT_EQ(out[r], out[0]) << "rank " << r << " logits differ from rank 0";
    return out[0];
  }
};

int argmax(const float* v, int64_t n) {
  int64_t b = 0;
  for (int64_t i = 1; i < n; ++i)
    if (v[i] > v[b]) b = i;
  return static_cast<int>(b);
}

/// Compares a prompt's all-position logits and a greedy continuation of `gen` tokens, unsharded vs sharded.
/// Returns the largest |difference| of logits relative to the largest |logit|.
double compare(const Transformer& full, int world, const std::vector<int32_t>& prompt, int gen, bool exact) {
  const int64_t V = full.vocab_size();
  std::vector<int32_t> table;
  for (int i = 0; i < 8; ++i) table.push_back(7 - i);  // a non-trivial block table (8 blocks of 16)
  KvCache cache(spec_of(full, 8));
  Group g(full, world, 8);
  BatchChunk ch{prompt, 0, table, true};
  std::vector<float> ref;
  CpuBackend(full).forward({&ch, 1}, cache, ref);
  std::vector<float> got = g.step({&ch, 1});
  EXPECT_EQ(ref.size(), got.size());
  double maxd = 0, maxa = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    maxd = std::max(maxd, static_cast<double>(std::fabs(ref[i] - got[i])));
    maxa = std::max(maxa, static_cast<double>(std::fabs(ref[i])));
  }
  if (exact) {
    EXPECT_EQ(maxd, 0.0) << "sharded logits are not bit-identical";
  }
  // Greedy continuation, token by token (decode steps), each side on its own tokens.
  std::vector<int32_t> a{argmax(&ref[(prompt.size() - 1) * V], V)}, b{argmax(&got[(prompt.size() - 1) * V], V)};
  for (int t = 0; t < gen; ++t) {
    const int64_t pos = static_cast<int64_t>(prompt.size()) + t;
    BatchChunk ca{std::span<const int32_t>(&a.back(), 1), pos, table, false};
    BatchChunk cb{std::span<const int32_t>(&b.back(), 1), pos, table, false};
    CpuBackend(full).forward({&ca, 1}, cache, ref);
    got = g.step({&cb, 1});
    a.push_back(argmax(ref.data(), V));
    b.push_back(argmax(got.data(), V));
    if (exact) {
      EXPECT_EQ(ref, got) << "decode step " << t;
    }
  }
  EXPECT_EQ(a, b) << "greedy continuation differs";
  return maxd / maxa;
}

std::vector<int32_t> some_prompt(int n, int vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> d(1, vocab - 1);
  std::vector<int32_t> p;
  for (int i = 0; i < n; ++i) p.push_back(d(rng));
  return p;
}

/// A small random model with 6 query heads in 3 KV groups, intermediate 99 and vocabulary 101 (uneven splits).
std::unique_ptr<Transformer> odd_model(bool bitnet) {
  ModelConfig c;
  c.arch = Arch::kLlama;
  c.vocab_size = 101;
  c.hidden_size = 64;
  c.intermediate_size = 99;
  c.num_layers = 2;
  c.num_heads = 6;
  c.num_kv_heads = 3;
  c.head_dim = 16;
  c.max_position_embeddings = 256;
  c.sub_norms = bitnet;
  c.hidden_act = bitnet ? Activation::kRelu2 : Activation::kSilu;
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 0.2f);
  std::uniform_int_distribution<int> td(-1, 1);
  auto floats = [&](int64_t n) {
    std::vector<float> v(static_cast<size_t>(n));
    for (auto& x : v) x = nd(rng);
    return v;
  };
  auto ones = [&](int64_t n) {
    std::vector<float> v(static_cast<size_t>(n));
    for (auto& x : v) x = 1.0f + 0.1f * nd(rng);
    return v;
  };
  auto lin = [&](int64_t n, int64_t k, std::vector<int64_t> seg_rows, bool bias) -> std::unique_ptr<Linear> {
    if (!bitnet) return std::make_unique<FloatLinear>(floats(n * k), bias ? floats(n) : std::vector<float>{}, n, k);
    std::vector<int8_t> w(static_cast<size_t>(n * k));
    for (auto& x : w) x = static_cast<int8_t>(td(rng));
    std::vector<TernaryLinear::Segment> segs;
    for (size_t i = 0; i < seg_rows.size(); ++i) segs.push_back({seg_rows[i], 0.5f + 0.25f * static_cast<float>(i)});
    return std::make_unique<TernaryLinear>(pack_ternary(TernaryFormat::kI2, w.data(), n, k), std::move(segs));
  };
  const int64_t H = c.hidden_size, qd = c.q_dim(), kvd = c.kv_dim(), I = c.intermediate_size;
  std::vector<LayerWeights> layers;
  for (int l = 0; l < c.num_layers; ++l) {
    LayerWeights L;
    L.input_norm = ones(H);
    L.post_attn_norm = ones(H);
    if (bitnet) {
      L.attn_sub_norm = ones(qd);
      L.ffn_sub_norm = ones(I);
    }
    L.qkv = lin(qd + 2 * kvd, H, {qd, kvd, kvd}, true);
    L.o = lin(H, qd, {H}, false);
    L.gate_up = lin(2 * I, H, {I, I}, false);
    L.down = lin(H, I, {H}, false);
    layers.push_back(std::move(L));
  }
  auto embed = std::make_shared<const std::vector<float>>(floats(c.vocab_size * H));
  auto head = std::make_unique<FloatLinear>(floats(c.vocab_size * H), std::vector<float>{}, c.vocab_size, H);
  return std::make_unique<Transformer>(c, embed, std::move(layers), ones(H), std::move(head));
}

}  // namespace

TEST(TensorParallel, PlanSplitsAndErrors) {
  auto m = odd_model(true);
  const TensorParallelPlan p = make_tp_plan(*m, 1, 2);
  EXPECT_TRUE(p.gather_mode);
  EXPECT_EQ(p.q_cols, (std::vector<int64_t>{32, 64}));  // KV groups 1 + 2, two query heads of 16 each
  EXPECT_EQ(p.i_cols, (std::vector<int64_t>{49, 50}));
  EXPECT_EQ(p.v_rows, (std::vector<int64_t>{50, 51}));
  EXPECT_FALSE(make_tp_plan(*odd_model(false), 0, 2).gather_mode);
  EXPECT_THROW(make_tp_plan(*m, 0, 4), Error);  // 3 KV heads over 4 ranks
  EXPECT_THROW(make_tp_plan(*m, 2, 2), Error);
  auto s = shard_transformer(*m, 1, 3);
  EXPECT_EQ(s->config().num_heads, 2);
  EXPECT_EQ(s->config().num_kv_heads, 1);
  EXPECT_EQ(s->config().intermediate_size, 33);
  EXPECT_EQ(s->layers()[0].qkv->out_features(), 2 * 16 + 16 + 16);
  // Ternary segments follow the slices: q rows (scale 0.5), k (0.75), v (1.0).
  const auto* t = dynamic_cast<const TernaryLinear*>(s->layers()[0].qkv.get());
  ASSERT_NE(t, nullptr);
  ASSERT_EQ(t->segments().size(), 3u);
  EXPECT_EQ(t->segments()[0].rows, 32);
  EXPECT_FLOAT_EQ(t->segments()[1].scale, 0.75f);
  EXPECT_EQ(s->lm_head().out_features(), 34);  // [33, 67)
}

TEST(TensorParallel, SlicedTernaryRowsAreTheOriginalRows) {
  std::vector<int8_t> w(40 * 130);
  std::mt19937 rng(1);
  for (auto& x : w) x = static_cast<int8_t>(static_cast<int>(rng() % 3) - 1);
  TernaryLinear full(pack_ternary(TernaryFormat::kTQ1, w.data(), 40, 130), {{20, 2.0f}, {20, 3.0f}});
  auto part = slice_linear_rows(full, {{5, 10}, {25, 27}});
  const auto* t = dynamic_cast<const TernaryLinear*>(part.get());
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->packed().format(), TernaryFormat::kTQ1);
  std::vector<int8_t> got(7 * 130);
  t->packed().unpack(got.data());
  EXPECT_TRUE(std::equal(got.begin(), got.begin() + 5 * 130, w.begin() + 5 * 130));
  EXPECT_TRUE(std::equal(got.begin() + 5 * 130, got.end(), w.begin() + 25 * 130));
  ASSERT_EQ(t->segments().size(), 2u);
  EXPECT_EQ(t->segments()[0].rows, 5);
  EXPECT_FLOAT_EQ(t->segments()[1].scale, 3.0f);
  EXPECT_THROW(slice_linear_rows(full, {{15, 25}}), Error);  // crosses the segment end
}

TEST(TensorParallel, BitnetOddSplitsBitIdentical) {
  OneThread one;
  auto m = odd_model(true);
  for (int world : {2, 3}) compare(*m, world, some_prompt(21, 101, 5), 12, true);
}

TEST(TensorParallel, FloatOddSplitsWithinTolerance) {
  OneThread one;
  auto m = odd_model(false);
  for (int world : {2, 3}) EXPECT_LT(compare(*m, world, some_prompt(21, 101, 6), 12, false), 1e-5);
}

TEST(TensorParallel, TinyBitnetBitIdentical) {
  OneThread one;
  auto m = load_transformer(test::bundled_model());
  compare(*m, 2, some_prompt(40, m->vocab_size(), 7), 16, true);
}

TEST(TensorParallel, TinyQwen2WithinTolerance) {
  REQUIRE_SHARED_DATA(shared);
  OneThread one;
  auto m = load_transformer(shared + "/models/tiny-qwen2");
  EXPECT_LT(compare(*m, 2, some_prompt(40, m->vocab_size(), 8), 16, false), 1e-5);
}

// int8 projections (LLM.int8() with its fp16 outlier copy, and per-tensor absmax) are column-parallel with their
// scales; o/down run replicated (gather mode), so every output row is computed exactly as unsharded.
TEST(TensorParallel, TinyQwen2Int8BitIdentical) {
  REQUIRE_SHARED_DATA(shared);
  OneThread one;
  for (const char* method : {"llm-int8", "int8-absmax"}) {
    SCOPED_TRACE(method);
    LoadOptions lo;
    lo.quant = method;
    auto m = load_transformer(shared + "/models/tiny-qwen2", lo);
    EXPECT_TRUE(make_tp_plan(*m, 0, 2).gather_mode);
    compare(*m, 2, some_prompt(40, m->vocab_size(), 9), 12, true);
  }
}
