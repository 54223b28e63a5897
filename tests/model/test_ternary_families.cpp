// The ternary families beside BitNet b1.58 2B4T, against transformers' own code (tests/data/models/*, goldens in
// tests/data/golden, written by tools/make_fixture_models.py with transformers 5.17, float32 eager):
//  - falcon-a: a Falcon3-1.58bit style LlamaForCausalLM whose quantization_config states only quant_method bitnet
//    (transformers' defaults: BitLinear, weight_scale divides, per-token int8 activations): the exact rule.
//  - trilm-a: a TriLM style unpacked LlamaForCausalLM (fp16 projections holding {-s, 0, +s} per tensor): recognised
//    as ternary at load and run on the ternary kernels with int8 activations, against a reference that computes
//    in 16-bit activations: perplexity within 0.5%, greedy ids equal except at near ties.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include <unistd.h>

#include "core/error.h"
#include "io/model_config.h"
#include "model/inspect.h"
#include "model/loader.h"
#include "quant/ternary_detect.h"
#include "hf_golden.h"
#include "test_util.h"

using namespace tritium;
namespace fs = std::filesystem;

namespace {

#define REQUIRE_FIXTURE(name)                                           \
  if (!fs::exists(test::fixture_model(name) + "/config.json"))          \
  GTEST_SKIP() << "tests/data/models/" name " not present (tools/make_fixture_models.py writes it)"

}  // namespace

TEST(Falcon3Bitnet, ConfigDefaultsToTransformersBitLinear) {
  REQUIRE_FIXTURE("falcon-a");
  const ModelConfig c = load_model_config(test::fixture_model("falcon-a"));
  EXPECT_EQ(c.arch, Arch::kLlama);
  EXPECT_TRUE(c.bitnet_quant);
  EXPECT_EQ(c.bitnet_scale_mode, BitNetScaleMode::kDivide);
  EXPECT_FALSE(c.sub_norms);
}

TEST(Falcon3Bitnet, LogitsAndGreedyMatchTransformers) {
  REQUIRE_FIXTURE("falcon-a");
  auto m = load_transformer(test::fixture_model("falcon-a"));
  EXPECT_NE(dynamic_cast<const TernaryLinear*>(m->layers()[0].qkv.get()), nullptr);
  auto be = test::cpu_backend(std::move(m));
  test::expect_matches_golden(*be, "falcon-a");
}

// The weight_scale convention matters: read as a multiplier (autobitlinear) the logits leave the goldens.
TEST(Falcon3Bitnet, MultiplyingByWeightScaleWouldBeWrong) {
  REQUIRE_FIXTURE("falcon-a");
  nlohmann::json j = nlohmann::json::parse(std::ifstream(test::fixture_model("falcon-a") + "/config.json"));
  j["quantization_config"]["linear_class"] = "autobitlinear";
  const fs::path dir = fs::temp_directory_path() / ("tritium-falcon-auto-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "config.json") << j.dump();
  fs::copy_file(test::fixture_model("falcon-a") + "/model.safetensors", dir / "model.safetensors",
                fs::copy_options::overwrite_existing);
  auto wrong = test::cpu_backend(load_transformer(dir.string()));
  auto right = test::cpu_backend(load_transformer(test::fixture_model("falcon-a")));
  const auto ids = test::hf_golden("falcon-a")["prompts"][0]["input_ids"].get<std::vector<int32_t>>();
  const auto a = test::prompt_logits(*wrong, ids), b = test::prompt_logits(*right, ids);
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, static_cast<double>(std::fabs(a[i] - b[i])));
  EXPECT_GT(d, 0.1);
  fs::remove_all(dir);
}

TEST(Falcon3Bitnet, UnsupportedBitnetConfigsAreClearErrors) {
  REQUIRE_FIXTURE("falcon-a");
  const nlohmann::json base = nlohmann::json::parse(std::ifstream(test::fixture_model("falcon-a") + "/config.json"));
  auto expect_error = [&](nlohmann::json j, const std::string& needle) {
    try {
      (void)parse_model_config(j, "cfg");
      ADD_FAILURE() << "accepted: " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  nlohmann::json j = base;
  j["quantization_config"]["use_rms_norm"] = true;
  expect_error(j, "use_rms_norm");
  j = base;
  j["architectures"] = {"Qwen2ForCausalLM"};
  expect_error(j, "Qwen2ForCausalLM with linear biases is not supported");
  j = base;
  j["quantization_config"]["linear_class"] = "fancylinear";
  expect_error(j, "linear_class 'fancylinear'");
  j = base;
  j["quantization_config"]["quantization_mode"] = "later";
  expect_error(j, "quantization_mode 'later'");
}

TEST(TriLM, UnpackedTernaryIsDetectedAndPacked) {
  REQUIRE_FIXTURE("trilm-a");
  auto m = load_transformer(test::fixture_model("trilm-a"));
  for (const auto& L : m->layers())
    for (const Linear* lin : {L.qkv.get(), L.o.get(), L.gate_up.get(), L.down.get()}) {
      const auto* t = dynamic_cast<const TernaryLinear*>(lin);
      ASSERT_NE(t, nullptr) << lin->format_name();
      EXPECT_TRUE(t->group_scales().empty());  // one scale per tensor: segments
    }
  // The head of this checkpoint is an ordinary fp16 matrix: it stays float.
  EXPECT_EQ(dynamic_cast<const TernaryLinear*>(&m->lm_head()), nullptr);
  // --detect-ternary off keeps the projections as stored.
  LoadOptions off;
  off.detect_ternary = false;
  EXPECT_EQ(load_transformer(test::fixture_model("trilm-a"), off)->layers()[0].qkv->format_name(), "f32");
}

TEST(TriLM, TernaryWithinTheRuleAndStoredExact) {
  REQUIRE_FIXTURE("trilm-a");
  auto be = test::cpu_backend(load_transformer(test::fixture_model("trilm-a")));
  const int equal = test::expect_matches_golden_16bit_reference(*be, "trilm-a");
  std::printf("  trilm-a ternary: %d of 3 prompts greedy-equal over all 24 steps\n", equal);
  LoadOptions off;
  off.detect_ternary = false;
  auto exact = test::cpu_backend(load_transformer(test::fixture_model("trilm-a"), off));
  test::expect_matches_golden(*exact, "trilm-a");
}

// A float tensor one value off the {-s, 0, s} pattern is not ternary: the projection stays float.
TEST(TriLM, DetectionIsExactOrNothing) {
  std::vector<float> w = {0.5f, -0.5f, 0.0f, 0.5f, 0.0f, -0.5f, 0.5f, 0.5f};
  auto t = detect_ternary(w.data(), 2, 4);
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->group_size, 0);
  EXPECT_EQ(t->scales, std::vector<float>{0.5f});
  EXPECT_EQ(t->q, (std::vector<int8_t>{1, -1, 0, 1, 0, -1, 1, 1}));
  w[3] = 0.50001f;
  EXPECT_FALSE(detect_ternary(w.data(), 2, 4).has_value());
  // Per row and group: rows with their own magnitude.
  std::vector<float> g = {0.25f, 0.0f, -0.25f, 0.25f, 2.0f, -2.0f, 0.0f, 2.0f};
  auto tg = detect_ternary(g.data(), 2, 4, 4);
  ASSERT_TRUE(tg.has_value());
  EXPECT_EQ(tg->group_size, 4);
  EXPECT_EQ(tg->scales, (std::vector<float>{0.25f, 2.0f}));
  std::vector<float> zeros(8, 0.0f);
  EXPECT_FALSE(detect_ternary(zeros.data(), 2, 4).has_value());
  std::vector<float> nan = g;
  nan[1] = std::nanf("");
  EXPECT_FALSE(detect_ternary(nan.data(), 2, 4, 4).has_value());
}
