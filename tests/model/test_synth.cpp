// tritium synth writes a loadable BitNet checkpoint with the requested zero density.
#include <gtest/gtest.h>

#include <filesystem>

#include "core/error.h"
#include "io/safetensors.h"
#include "model/loader.h"
#include "model/source_safetensors.h"
#include "model/synth.h"
#include "kv/block_allocator.h"
#include "test_util.h"

using namespace tritium;

namespace {

/// Prefills 3 tokens of a model of the tiny shape (2 KV heads of 64, vocabulary 8192): finite logits.
void expect_finite_prefill(Backend& model) {
  const ModelConfig& c = model.model().config();
  KvCache cache(KvCacheSpec{c.num_layers, c.num_kv_heads, c.head_dim, 16, 1});
  std::vector<int32_t> toks = {0, 5, 9}, bt = {0};
  BatchChunk ch{toks, 0, bt, false};
  std::vector<float> logits;
  model.forward(std::span<const BatchChunk>(&ch, 1), cache, logits);
  ASSERT_EQ(logits.size(), 8192u);
  for (float v : logits) ASSERT_TRUE(std::isfinite(v));
}

}  // namespace

TEST(Synth, TinyShapeLoadsAndHasRequestedZeroDensity) {
  const auto dir = std::filesystem::temp_directory_path() / "tritium_synth_test";
  std::filesystem::remove_all(dir);
  SynthOptions o;
  o.shape = "tiny";
  o.zero_density = 0.42;
  o.seed = 7;
  o.tokenizer_dir = test::bundled_model();
  write_synthetic_bitnet(dir.string(), o);
  WeightStore ws(dir.string());
  const TensorView& t = ws.get("model.layers.3.mlp.up_proj.weight", {768 / 4, 256});
  auto w = unpack_bitnet_weight(t.data, 768, 256);
  int64_t zeros = 0, plus = 0;
  for (int8_t v : w) {
    zeros += v == 0;
    plus += v == 1;
  }
  const double z = static_cast<double>(zeros) / static_cast<double>(w.size());
  EXPECT_NEAR(z, 0.42, 0.01);
  EXPECT_NEAR(static_cast<double>(plus) / (w.size() - zeros), 0.5, 0.01);
  auto model = test::cpu_backend(load_transformer(dir.string()));
  EXPECT_EQ(model->model().config().num_layers, 8);
  expect_finite_prefill(*model);
  std::filesystem::remove_all(dir);
}

TEST(Synth, RejectsBadArguments) {
  SynthOptions o;
  o.zero_density = 1.5;
  EXPECT_THROW(write_synthetic_bitnet("/tmp/tritium_synth_bad", o), Error);
  o.zero_density = 0.4;
  o.shape = "nonsense";
  EXPECT_THROW(write_synthetic_bitnet("/tmp/tritium_synth_bad", o), Error);
  o.shape = "tiny";
  o.intermediate_size = 702;  // not a multiple of 4: the packed layout holds 4 rows per byte
  EXPECT_THROW(write_synthetic_bitnet("/tmp/tritium_synth_bad", o), Error);
}

TEST(Synth, IntermediateSizeOverride) {
  const auto dir = std::filesystem::temp_directory_path() / "tritium_synth_inter";
  std::filesystem::remove_all(dir);
  SynthOptions o;
  o.shape = "tiny";
  o.num_layers = 2;
  o.intermediate_size = 700;  // not a multiple of 16 or 64: padded tiles in every packed format
  o.tokenizer_dir = test::bundled_model();
  write_synthetic_bitnet(dir.string(), o);
  auto model = test::cpu_backend(load_transformer(dir.string()));
  EXPECT_EQ(model->model().config().intermediate_size, 700);
  expect_finite_prefill(*model);
  std::filesystem::remove_all(dir);
}
