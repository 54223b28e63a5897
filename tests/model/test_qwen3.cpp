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
#include "hf_golden.h"
#include "test_util.h"

using namespace tritium;
namespace fs = std::filesystem;

namespace {

const char* const kModels[] = {"qwen3-a", "qwen3-b", "qwen3-t"};

using test::fixture_model;
std::string fixture(const std::string& name) { return fixture_model(name); }
nlohmann::json golden(const std::string& name) { return test::hf_golden(name); }

LoadOptions stored() {
  LoadOptions o;
  o.detect_ternary = false;
  return o;
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
    auto be = test::cpu_backend(load_transformer(fixture(name), stored()));
    test::expect_matches_golden(*be, name);
  }
}

// qwen3-t (Ternary Bonsai style: ternary values times group-128 scales, in bf16) with default options: every
// projection and the head are recognised as ternary and run packed on the ternary kernels (int8 activations), while
// transformers computes in 16-bit activations: perplexity within 0.5% and greedy ids equal except at near ties.
TEST(Qwen3, BonsaiStyleCheckpointRunsTernaryWithinTheRule) {
  REQUIRE_QWEN3_FIXTURE();
  auto m = load_transformer(fixture("qwen3-t"));
  for (const auto& L : m->layers())
    for (const Linear* lin : {L.qkv.get(), L.o.get(), L.gate_up.get(), L.down.get()}) {
      const auto* t = dynamic_cast<const TernaryLinear*>(lin);
      ASSERT_NE(t, nullptr) << lin->format_name();
      EXPECT_FALSE(t->group_scales().empty());
    }
  EXPECT_NE(dynamic_cast<const TernaryLinear*>(&m->lm_head()), nullptr) << m->lm_head().format_name();
  auto be = test::cpu_backend(std::move(m));
  const int equal = test::expect_matches_golden_16bit_reference(*be, "qwen3-t");
  std::printf("  qwen3-t ternary: %d of 3 prompts greedy-equal over all 24 steps\n", equal);
  // qwen3-a is bf16 without that structure: nothing is detected.
  auto a = load_transformer(fixture("qwen3-a"));
  EXPECT_EQ(a->layers()[0].qkv->format_name(), "f32");
}

// The same checkpoint on the GPU: the group-scaled ternary kernels (ternary_grouped_matmul) for every projection and
// the head, within the same rule against transformers.
TEST(Qwen3, BonsaiStyleCheckpointRunsTernaryOnCuda) {
  REQUIRE_QWEN3_FIXTURE();
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device (or built without CUDA)";
  auto be = test::backend_for(load_transformer(fixture("qwen3-t")), true);
  const int equal = test::expect_matches_golden_16bit_reference(*be, "qwen3-t");
  std::printf("  qwen3-t ternary on CUDA: %d of 3 prompts greedy-equal over all 24 steps\n", equal);
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
    auto src = load_transformer(fixture(name), stored());
    write_tritium_model(*src, fixture(name), out.string(), {fixture(name), "", "", ""});
    auto a = test::cpu_backend(std::move(src));
    auto b = test::cpu_backend(load_transformer(out.string(), stored()));
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
