// Qwen3ForCausalLM (per-head q_norm / k_norm before RoPE, explicit head_dim, tied or untied head, optional
// attention biases) against transformers' own Qwen3 code: tests/data/models/qwen3-{a,b,t} are small seeded
// checkpoints (qwen3-t: Ternary Bonsai style, ternary values times group-128 scales stored in bf16) and
// tests/data/golden/qwen3-*.json / .logits.safetensors their goldens, written by tools/make_fixture_models.py
// (transformers 5.17, float32 eager).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include <unistd.h>

#include "core/error.h"
#include "io/safetensors.h"
#include "kv/block_allocator.h"
#include "model/loader.h"
#include "model/tritium_model.h"
#include "test_util.h"

using namespace tritium;
namespace fs = std::filesystem;

namespace {

const char* const kModels[] = {"qwen3-a", "qwen3-b", "qwen3-t"};

std::string fixture(const std::string& name) { return test::data_dir() + "/models/" + name; }
std::string golden_path(const std::string& name) { return test::data_dir() + "/golden/" + name; }

nlohmann::json golden(const std::string& name) {
  std::ifstream in(golden_path(name) + ".json");
  return nlohmann::json::parse(in);
}

int argmax(const float* v, int n) { return static_cast<int>(std::max_element(v, v + n) - v); }

// Greedy continuation through one KV cache: the prompt's prefill, then one decode step per token.
std::vector<int32_t> greedy(Backend& be, const std::vector<int32_t>& ids, int n) {
  const auto& c = be.model().config();
  const int64_t total = static_cast<int64_t>(ids.size()) + n;
  KvCacheSpec spec{c.num_layers, c.num_kv_heads, c.head_dim, 16, (total + 15) / 16};
  KvCache cache(spec);
  BlockAllocator alloc(spec.num_blocks);
  BlockTable bt;
  EXPECT_TRUE(bt.reserve(alloc, total, spec.block_size));
  const int V = be.model().vocab_size();
  std::vector<float> logits;
  BatchChunk first{ids, 0, bt.blocks, false};
  be.forward(std::span<const BatchChunk>(&first, 1), cache, logits);
  std::vector<int32_t> out{argmax(logits.data() + logits.size() - V, V)};
  while (static_cast<int>(out.size()) < n) {
    const int32_t tok = out.back();
    BatchChunk step{std::span<const int32_t>(&tok, 1), static_cast<int64_t>(ids.size() + out.size() - 1), bt.blocks,
                    false};
    be.forward(std::span<const BatchChunk>(&step, 1), cache, logits);
    out.push_back(argmax(logits.data() + logits.size() - V, V));
  }
  return out;
}

void expect_matches_golden(Backend& be, const std::string& name) {
  const nlohmann::json g = golden(name);
  auto ref = WeightStore::from_file(golden_path(name) + ".logits.safetensors");
  const int V = be.model().vocab_size();
  for (size_t i = 0; i < g["prompts"].size(); ++i) {
    const nlohmann::json& p = g["prompts"][i];
    const auto ids = p["input_ids"].get<std::vector<int32_t>>();
    const std::vector<float> logits = test::prompt_logits(be, ids);
    const std::vector<float> want = tensor_to_f32(ref->get("logits_" + std::to_string(i)));
    ASSERT_EQ(logits.size(), want.size());
    double max_d = 0;
    for (size_t k = 0; k < want.size(); ++k) max_d = std::max(max_d, static_cast<double>(std::fabs(logits[k] - want[k])));
    for (size_t t = 0; t < ids.size(); ++t)
      EXPECT_EQ(argmax(&logits[t * V], V), argmax(&want[t * V], V)) << name << " prompt " << i << " position " << t;
    EXPECT_LE(max_d, 2e-3) << name << " prompt " << i;
    // Greedy ids equal up to the first step the reference itself calls a near tie (top-2 gap under 1e-3).
    const auto want_ids = p["greedy_ids"].get<std::vector<int32_t>>();
    const auto gaps = p["greedy_top2_gap"].get<std::vector<double>>();
    const std::vector<int32_t> got = greedy(be, ids, static_cast<int>(want_ids.size()));
    size_t checked = 0;
    for (; checked < want_ids.size() && gaps[checked] >= 1e-3; ++checked)
      ASSERT_EQ(got[checked], want_ids[checked]) << name << " prompt " << i << " step " << checked;
    std::printf("  %s prompt %zu: %zu tokens, max |dlogit| %.3g, %zu/%zu greedy ids compared and equal\n",
                name.c_str(), i, ids.size(), max_d, checked, want_ids.size());
  }
}

#define REQUIRE_QWEN3_FIXTURE()                                        \
  if (!fs::exists(fixture("qwen3-a") + "/config.json"))                \
  GTEST_SKIP() << "tests/data/models/qwen3-a not present (tools/make_fixture_models.py writes it)"

}  // namespace

TEST(Qwen3, ConfigStatesQkNormAndHeadDim) {
  REQUIRE_QWEN3_FIXTURE();
  const ModelConfig a = load_model_config(fixture("qwen3-a"));
  EXPECT_EQ(a.arch, Arch::kQwen3);
  EXPECT_TRUE(a.qk_norm);
  EXPECT_EQ(a.head_dim, 32);  // not hidden / heads = 24
  EXPECT_FALSE(a.qkv_bias);
  EXPECT_TRUE(a.tie_word_embeddings);
  const ModelConfig b = load_model_config(fixture("qwen3-b"));
  EXPECT_TRUE(b.qkv_bias);
  EXPECT_TRUE(b.o_bias);  // Qwen3's attention_bias covers o_proj too
  EXPECT_FALSE(b.tie_word_embeddings);
}

TEST(Qwen3, LogitsAndGreedyMatchTransformers) {
  REQUIRE_QWEN3_FIXTURE();
  for (const char* name : kModels) {
    auto be = test::cpu_backend(load_transformer(fixture(name)));
    expect_matches_golden(*be, name);
  }
}

// One thread and two: the same bits (the per-head norm splits rows over threads, never a row).
TEST(Qwen3, ThreadCountInvariant) {
  REQUIRE_QWEN3_FIXTURE();
  auto be = test::cpu_backend(load_transformer(fixture("qwen3-a")));
  const auto ids = golden("qwen3-a")["prompts"][2]["input_ids"].get<std::vector<int32_t>>();
  std::vector<float> one;
  {
    test::OneThread t;
    one = test::prompt_logits(*be, ids);
  }
  EXPECT_EQ(test::prompt_logits(*be, ids), one);
}

// A converted tritium model stores q_norm / k_norm and gives the same logits bit for bit.
TEST(Qwen3, ConvertedModelIsBitIdentical) {
  REQUIRE_QWEN3_FIXTURE();
  const fs::path out = fs::temp_directory_path() / ("tritium-qwen3-convert-" + std::to_string(::getpid()));
  for (const char* name : kModels) {
    auto src = load_transformer(fixture(name));
    write_tritium_model(*src, fixture(name), out.string(), {fixture(name), "", "", ""});
    auto a = test::cpu_backend(std::move(src));
    auto b = test::cpu_backend(load_transformer(out.string()));
    const auto ids = golden(name)["prompts"][1]["input_ids"].get<std::vector<int32_t>>();
    EXPECT_EQ(test::prompt_logits(*a, ids), test::prompt_logits(*b, ids)) << name;
    fs::remove_all(out);
  }
}

// A checkpoint without its q_norm is refused, naming the tensor.
TEST(Qwen3, MissingQkNormIsAClearError) {
  REQUIRE_QWEN3_FIXTURE();
  const fs::path dir = fs::temp_directory_path() / ("tritium-qwen3-missing-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  fs::copy_file(fixture("qwen3-a") + "/config.json", dir / "config.json", fs::copy_options::overwrite_existing);
  auto ws = WeightStore::from_file(fixture("qwen3-a") + "/model.safetensors");
  std::vector<TensorToWrite> keep;
  for (const std::string& n : ws->names()) {
    if (n == "model.layers.1.self_attn.q_norm.weight") continue;
    const TensorView& t = ws->get(n);
    keep.push_back({n, t.dtype, t.shape, t.data, t.nbytes});
  }
  write_safetensors((dir / "model.safetensors").string(), keep, {{"format", "pt"}});
  try {
    (void)load_transformer(dir.string());
    ADD_FAILURE() << "a Qwen3 checkpoint without q_norm loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.layers.1.self_attn.q_norm.weight"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}
