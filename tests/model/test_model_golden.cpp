// The transformer against Hugging Face transformers' golden logits and greedy continuations.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>

#include "io/safetensors.h"
#include "model/loader.h"
#include "kv/block_allocator.h"
#include "backend/cuda/cuda_backend.h"
#include "test_util.h"

using namespace tritium;

namespace {

struct GoldenCase {
  std::string model_dir, golden_json, golden_logits;
};

int argmax(const float* v, int n) { return static_cast<int>(std::max_element(v, v + n) - v); }

void check_logits(const GoldenCase& gc, float max_tol, float mean_tol, bool cuda = false) {
  auto model = test::backend_for(load_transformer(gc.model_dir), cuda);
  std::ifstream in(gc.golden_json);
  auto golden = nlohmann::json::parse(in);
  auto ref = WeightStore::from_file(gc.golden_logits);
  const int V = model->model().vocab_size();
  for (size_t i = 0; i < golden["prompts"].size(); ++i) {
    std::vector<int32_t> ids = golden["prompts"][i]["input_ids"].get<std::vector<int32_t>>();
    const std::vector<float> logits = test::prompt_logits(*model, ids);
    const TensorView& t = ref->get("logits_" + std::to_string(i));
    ASSERT_EQ(t.shape, (std::vector<int64_t>{static_cast<int64_t>(ids.size()), V}));
    std::vector<float> g = tensor_to_f32(t);
    double max_d = 0, sum_d = 0;
    for (size_t p = 0; p < ids.size(); ++p) {
      EXPECT_EQ(argmax(&logits[p * V], V), argmax(&g[p * V], V)) << "prompt " << i << " position " << p;
      for (int v = 0; v < V; ++v) {
        const double d = std::fabs(logits[p * V + v] - g[p * V + v]);
        max_d = std::max(max_d, d);
        sum_d += d;
      }
    }
    const double mean_d = sum_d / (static_cast<double>(ids.size()) * V);
    EXPECT_LE(max_d, max_tol) << "prompt " << i;
    EXPECT_LE(mean_d, mean_tol) << "prompt " << i;
    std::printf("  prompt %zu: %zu tokens, max |dlogit| %.3g, mean %.3g\n", i, ids.size(), max_d, mean_d);
  }
}

}  // namespace

TEST(ModelGolden, TinyBitnetLogits) {
  const std::string d = test::data_dir() + "/golden";
  check_logits({test::bundled_model(), d + "/tiny-bitnet.json", d + "/tiny-bitnet.logits.safetensors"}, 0.5f, 0.05f);
}

TEST(ModelGolden, TinyQwen2Logits) {
  REQUIRE_SHARED_DATA(s);
  check_logits({s + "/models/tiny-qwen2", s + "/golden/tiny-qwen2.json", s + "/golden/tiny-qwen2.logits.safetensors"},
               2e-3f, 2e-3f);
}

// The same goldens with the whole forward on the GPU (skipped visibly without CUDA or a GPU).
#define REQUIRE_CUDA_DEVICE() \
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device (or built without CUDA): CUDA golden test skipped"

TEST(ModelGolden, TinyBitnetLogitsCuda) {
  REQUIRE_CUDA_DEVICE();
  const std::string d = test::data_dir() + "/golden";
  check_logits({test::bundled_model(), d + "/tiny-bitnet.json", d + "/tiny-bitnet.logits.safetensors"}, 0.5f, 0.05f,
               true);
}

TEST(ModelGolden, TinyQwen2LogitsCuda) {
  REQUIRE_CUDA_DEVICE();
  REQUIRE_SHARED_DATA(s);
  // lm_head in bf16 on the GPU: the tolerance is that of bf16 activations (float logits on the CPU: 2e-3).
  check_logits({s + "/models/tiny-qwen2", s + "/golden/tiny-qwen2.json", s + "/golden/tiny-qwen2.logits.safetensors"},
               5e-2f, 1e-2f, true);
}
