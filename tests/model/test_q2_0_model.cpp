// Ternary Bonsai as a GGUF Q2_0 file: tests/data/models/qwen3-t (a Qwen3 checkpoint whose projections, head and
// embedding are ternary times group-128 scales, stored in bf16, with its transformers golden) written as Q2_0 in
// both block layouts. The file must give the same logits as the 16-bit checkpoint (both run packed ternary),
// hold its projections and head packed and its embedding in its 2-bit blocks, and stay within the golden's rule
// for a 16-bit reference; a tensor using code 3 is computed in float32, exactly.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "core/dtype.h"
#include "formats/gguf_quants.h"
#include "gguf_test_util.h"
#include "hf_golden.h"
#include "io/gguf_writer.h"
#include "io/model_config.h"
#include "io/safetensors.h"
#include "model/source_gguf.h"
#include "model/loader.h"
#include "quant/ternary_detect.h"
#include "test_util.h"

using namespace tritium;
namespace fs = std::filesystem;

namespace {

// Writes `folder` (qwen3-t) as a qwen3 GGUF file: 2-D tensors as Q2_0 in `block`-weight blocks (their scales must be
// exact in fp16), 1-D ones as F32. `code3` puts the code 3 (+2 d) into layer 0's o_proj at weight 5.
void write_q2_0_gguf(const std::string& folder, const std::string& path, int64_t block, bool code3 = false) {
  const ModelConfig c = load_model_config(folder);
  const WeightStore store(folder);
  GgufFileWriter w;
  w.add_string("general.architecture", "qwen3");
  w.add_u32("qwen3.block_count", static_cast<uint32_t>(c.num_layers));
  w.add_u32("qwen3.context_length", static_cast<uint32_t>(c.max_position_embeddings));
  w.add_u32("qwen3.embedding_length", static_cast<uint32_t>(c.hidden_size));
  w.add_u32("qwen3.feed_forward_length", static_cast<uint32_t>(c.intermediate_size));
  w.add_u32("qwen3.attention.head_count", static_cast<uint32_t>(c.num_heads));
  w.add_u32("qwen3.attention.head_count_kv", static_cast<uint32_t>(c.num_kv_heads));
  w.add_u32("qwen3.attention.key_length", static_cast<uint32_t>(c.head_dim));
  w.add_u32("qwen3.attention.value_length", static_cast<uint32_t>(c.head_dim));
  w.add_f32("qwen3.rope.freq_base", static_cast<float>(c.rope_theta));
  w.add_f32("qwen3.attention.layer_norm_rms_epsilon", c.rms_norm_eps);
  for (const std::string& name : store.names()) {
    const TensorView& t = store.get(name);
    std::vector<float> f = tensor_to_f32(t);
    const std::string g = gguf_tensor_name(name);
    if (t.shape.size() == 1) {
      const int64_t n = t.shape[0];
      w.add_tensor(g, 0, {n}, static_cast<uint64_t>(n) * 4,
                   [f](uint8_t* dst) { std::memcpy(dst, f.data(), f.size() * 4); });
      continue;
    }
    const int64_t rows = t.shape[0], cols = t.shape[1];
    const auto q = detect_ternary(f.data(), rows, cols, 128);
    ASSERT_TRUE(q.has_value()) << name;
    const int64_t G = cols / 128, per = 128 / block;
    std::vector<uint16_t> d(static_cast<size_t>(rows * G * per));
    for (size_t i = 0; i < d.size(); ++i) {
      const float s = q->group_size == 0 ? q->scales[0] : q->scales[i / static_cast<size_t>(per)];
      d[i] = f32_to_f16(s);
      ASSERT_EQ(f16_to_f32(d[i]), s) << name << ": scale not exact in fp16";
    }
    std::vector<uint8_t> bytes(static_cast<size_t>(rows * cols / block * (2 + block / 4)));
    encode_q2_0(q->q.data(), d.data(), rows * cols, block, bytes.data());
    if (code3 && name == "model.layers.0.self_attn.o_proj.weight") bytes[2 + 1] |= 0x0c;  // weight 5: code 3
    w.add_tensor(g, 42, {cols, rows}, bytes.size(),
                 [bytes](uint8_t* dst) { std::memcpy(dst, bytes.data(), bytes.size()); });
  }
  w.write(path);
}

#define REQUIRE_QWEN3_T()                                                     \
  const std::string folder = test::fixture_model("qwen3-t");                  \
  if (!fs::exists(folder + "/config.json")) GTEST_SKIP() << "tests/data/models/qwen3-t not present"

}  // namespace

TEST(Q2_0Model, BothLayoutsGiveTheSixteenBitCheckpointsLogits) {
  REQUIRE_QWEN3_T();
  test::TempDir dir;
  auto be16 = test::cpu_backend(load_transformer(folder));
  const nlohmann::json g = test::hf_golden("qwen3-t");
  for (int64_t block : {128, 64}) {
    const std::string path = dir.file("qwen3-t-" + std::to_string(block) + ".gguf");
    write_q2_0_gguf(folder, path, block);
    auto m = load_transformer(path);
    EXPECT_TRUE(m->embed().is_q2_0());
    // The head holds its own packed copy: lookups read the table's rows from the file, not through the mapping.
    EXPECT_TRUE(m->embed().reads_rows_from_file());
    EXPECT_EQ(m->embed().bytes(), static_cast<size_t>(m->vocab_size() * 128 / block * (2 + block / 4)));
    // Q2_0's scales are fp16: held as fp16 (2 bytes per group), the file's own precision.
    auto expect_fp16_scales = [](const Linear* lin) {
      const auto* t = dynamic_cast<const TernaryLinear*>(lin);
      ASSERT_NE(t, nullptr) << lin->format_name();
      EXPECT_EQ(t->group_scale_bytes(), static_cast<size_t>(2 * ((t->out_features() + 15) / 16 * 16) * t->packed().groups()))
          << t->out_features() << " x " << t->in_features();
    };
    for (const auto& L : m->layers())
      for (const Linear* lin : {L.qkv.get(), L.o.get(), L.gate_up.get(), L.down.get()}) expect_fp16_scales(lin);
    expect_fp16_scales(&m->lm_head());
    auto be = test::cpu_backend(std::move(m));
    for (const auto& p : g["prompts"]) {
      const auto ids = p["input_ids"].get<std::vector<int32_t>>();
      const std::vector<float> a = test::prompt_logits(*be, ids), b = test::prompt_logits(*be16, ids);
      ASSERT_EQ(a.size(), b.size());
      for (size_t k = 0; k < a.size(); ++k) ASSERT_EQ(a[k], b[k]) << "block " << block << " logit " << k;
    }
    if (block == 128) test::expect_matches_golden_16bit_reference(*be, "qwen3-t");
  }
}

// On the GPU: a Q2_0 file (both layouts) runs the group-scaled ternary kernels with the logits of the 16-bit
// checkpoint on the same backend, bit for bit.
TEST(Q2_0Model, BothLayoutsOnCudaGiveTheSixteenBitCheckpointsLogits) {
  REQUIRE_QWEN3_T();
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device (or built without CUDA)";
  test::TempDir dir;
  auto be16 = test::backend_for(load_transformer(folder), true);
  const nlohmann::json g = test::hf_golden("qwen3-t");
  for (int64_t block : {128, 64}) {
    const std::string path = dir.file("qwen3-t-" + std::to_string(block) + ".gguf");
    write_q2_0_gguf(folder, path, block);
    auto be = test::backend_for(load_transformer(path), true);
    for (const auto& p : g["prompts"]) {
      const auto ids = p["input_ids"].get<std::vector<int32_t>>();
      const std::vector<float> a = test::prompt_logits(*be, ids), b = test::prompt_logits(*be16, ids);
      ASSERT_EQ(a.size(), b.size());
      for (size_t k = 0; k < a.size(); ++k) ASSERT_EQ(a[k], b[k]) << "block " << block << " logit " << k;
    }
  }
}

TEST(Q2_0Model, CodeThreeTensorIsComputedInFloat32) {
  REQUIRE_QWEN3_T();
  test::TempDir dir;
  const std::string path = dir.file("code3.gguf");
  write_q2_0_gguf(folder, path, 128, /*code3=*/true);
  testing::internal::CaptureStderr();
  auto m = load_transformer(path);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("tensor 'blk.0.attn_output.weight' (Q2_0) uses the 2-bit code 3"), std::string::npos) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  EXPECT_EQ(m->layers()[0].o->format_name(), "f32");
  EXPECT_NE(dynamic_cast<const TernaryLinear*>(m->layers()[1].o.get()), nullptr);
  // The float32 weight holds +2 d where the code 3 is, as dequantize_row_q2_0 computes it.
  const GgufFile f = GgufFile::open(path);
  const GgufTensorInfo& t = f.tensor("blk.0.attn_output.weight");
  const std::vector<float> w = gguf_tensor_to_f32(t, path);
  float d;
  std::vector<int8_t> v(128);
  decode_q2_0(t.data, 128, 128, v.data(), &d);
  EXPECT_EQ(v[5], 2);
  EXPECT_EQ(w[5], 2.0f * d);
  // Detection off keeps every Q2_0 projection in float32 (the dequantized values), with no ternary layer.
  LoadOptions off;
  off.detect_ternary = false;
  testing::internal::CaptureStderr();
  auto plain = load_transformer(path, off);
  testing::internal::GetCapturedStderr();
  EXPECT_EQ(plain->layers()[1].o->format_name(), "f32");
}
