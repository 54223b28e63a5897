// One harness for every backend (as ggml's test-backend-ops does for its backends): the same batches run on each
// backend this machine has and on the reference — the CPU backend on the scalar kernel path — and every backend's
// logits must match the reference's. The batches cover what the engine sends: a mixed batch of prefill chunks of
// several sequences (one scoring every position) over scattered block tables, then batched decode steps, then a
// chunked prefill continuing a cached sequence. Backends: the CPU on each SIMD path it supports; with a GPU, the
// CUDA backend in both ternary layouts (tc2, tcb).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cuda/cuda_backend.h"
#include "kernels/cpu/dispatch.h"
#include "model/linear.h"
#include "model/loader.h"
#include "test_util.h"

using namespace tritium;

namespace {

struct Candidate {
  std::string name;
  std::function<std::shared_ptr<Backend>(const Transformer&)> make;
  cpu::KernelPath path = cpu::KernelPath::kRef;  // the CPU kernel path in force while it runs
};

std::vector<Candidate> candidates() {
  std::vector<Candidate> out;
  for (cpu::KernelPath p : {cpu::KernelPath::kAvx2, cpu::KernelPath::kAvx512, cpu::KernelPath::kAmx})
    if (cpu::kernel_path_supported(p))
      out.push_back({"cpu " + std::string(cpu::kernel_path_name(p)),
                     [](const Transformer& m) { return std::make_shared<CpuBackend>(m); }, p});
  if (cuda_device_count() > 0) {
    for (const char* layout : {"tc2", "tcb"}) {
      out.push_back({std::string("cuda ") + layout, [layout](const Transformer& m) {
                       CudaOptions o;
                       o.ternary_layout = layout;
                       o.lm_head_bf16 = false;  // an f32 head, as the reference's
                       return make_cuda_backend(m, o);
                     }});
    }
  }
  return out;
}

/// The batches of one run: each step is a list of chunks; the logits of every step are concatenated.
struct Script {
  std::vector<std::vector<int32_t>> prompts;  // three sequences
  std::vector<std::vector<int32_t>> tables;   // their block tables (scattered, disjoint)
};

Script make_script(int vocab) {
  Script s;
  const int lens[] = {19, 33, 7};
  for (int q = 0; q < 3; ++q) {
    std::vector<int32_t> p;
    for (int i = 0; i < lens[q]; ++i) p.push_back(static_cast<int32_t>((i * 7919 + 131 * q + 5) % vocab));
    s.prompts.push_back(p);
  }
  s.tables = {{9, 2, 14, 5}, {0, 11, 7, 3}, {12, 1, 8, 6}};  // 4 blocks of 16 each
  return s;
}

std::vector<float> run(Backend& b, const Script& s) {
  const ModelConfig& c = b.model().config();
  KvCache cache(KvCacheSpec{c.num_layers, c.num_kv_heads, c.head_dim, 16, 16});
  std::vector<float> all, logits;
  auto step = [&](const std::vector<BatchChunk>& batch) {
    b.forward(batch, cache, logits);
    all.insert(all.end(), logits.begin(), logits.end());
  };
  // 1. Prefill: sequence 0 scores every position, 1 and 2 only their last; sequence 2's prompt is cut after 4
  //    tokens (its rest comes in step 3 as a chunk over the cached prefix).
  const std::vector<int32_t> head2(s.prompts[2].begin(), s.prompts[2].begin() + 4);
  const std::vector<int32_t> rest2(s.prompts[2].begin() + 4, s.prompts[2].end());
  step({{s.prompts[0], 0, s.tables[0], true}, {s.prompts[1], 0, s.tables[1], false}, {head2, 0, s.tables[2], false}});
  // 2. Three batched decode steps of sequences 0 and 1 (fixed tokens, so every backend sees the same inputs).
  for (int t = 0; t < 3; ++t) {
    const int32_t a = 100 + t, d = 200 + t;
    const int64_t p0 = static_cast<int64_t>(s.prompts[0].size()) + t, p1 = static_cast<int64_t>(s.prompts[1].size()) + t;
    step({{std::span<const int32_t>(&a, 1), p0, s.tables[0], false},
          {std::span<const int32_t>(&d, 1), p1, s.tables[1], false}});
  }
  // 3. Sequence 2's remaining prompt as a chunk after its cached 4 tokens, scoring every position, beside a
  //    decode token of sequence 0.
  const int32_t e = 300;
  step({{rest2, 4, s.tables[2], true},
        {std::span<const int32_t>(&e, 1), static_cast<int64_t>(s.prompts[0].size()) + 3, s.tables[0], false}});
  return all;
}

/// Restores the automatic CPU kernel path when the check ends, also through a failed assertion.
struct PathGuard {
  ~PathGuard() { cpu::reset_cpu_kernel_path(); }
};

/// cpu_tol / gpu_tol: the largest |logit difference| allowed, relative to the row's largest |logit|.
void check_model(const Transformer& m, const char* what, double cpu_tol, double gpu_tol) {
  const PathGuard guard;
  const int V = m.vocab_size();
  const Script s = make_script(V);
  cpu::set_cpu_kernel_path(cpu::KernelPath::kRef);
  CpuBackend ref_backend(m);
  const std::vector<float> ref = run(ref_backend, s);
  const auto cands = candidates();
  ASSERT_FALSE(cands.empty());
  for (const Candidate& cand : cands) {
    cpu::set_cpu_kernel_path(cand.path);
    auto b = cand.make(m);
    const std::vector<float> got = run(*b, s);
    ASSERT_EQ(got.size(), ref.size()) << what << " on " << cand.name;
    const size_t rows = ref.size() / V;
    double worst = 0;
    int flips = 0;
    for (size_t r = 0; r < rows; ++r) {
      const float* a = &ref[r * V];
      const float* g = &got[r * V];
      float scale = 0, diff = 0;
      for (int v = 0; v < V; ++v) {
        scale = std::max(scale, std::fabs(a[v]));
        diff = std::max(diff, std::fabs(a[v] - g[v]));
      }
      ASSERT_TRUE(std::isfinite(diff)) << what << " on " << cand.name << ", row " << r;
      worst = std::max(worst, static_cast<double>(diff / scale));
      // The argmax must agree wherever the reference's top two are further apart than the tolerance allows.
      const int ia = static_cast<int>(std::max_element(a, a + V) - a);
      const int ig = static_cast<int>(std::max_element(g, g + V) - g);
      float second = -1e30f;
      for (int v = 0; v < V; ++v)
        if (v != ia) second = std::max(second, a[v]);
      if (ia != ig && a[ia] - second > 2 * diff) ++flips;
    }
    const double tol = cand.name.rfind("cpu", 0) == 0 ? cpu_tol : gpu_tol;
    EXPECT_LE(worst, tol) << what << " on " << cand.name;
    EXPECT_EQ(flips, 0) << what << " on " << cand.name;
    std::printf("[ backends ] %s on %s: %zu logit rows, max |diff| / max |logit| %.3g\n", what, cand.name.c_str(),
                rows, worst);
  }
}

}  // namespace

TEST(Backends, TinyBitnetEveryBackendMatchesTheCpuReference) {
  const test::OneThread one;
  // Every path sums the ternary products exactly, but attention and softmax sum floats in other orders (AVX2, the
  // GPU); a last-bit difference of an activation can move its int8 code, and that spreads over 8 layers: measured
  // up to 1.6% of the largest logit on the CPU paths, with the same argmax.
  check_model(*load_transformer(test::bundled_model()), "tiny-bitnet", 3e-2, 3e-2);
}

TEST(Backends, TinyQwen2EveryBackendMatchesTheCpuReference) {
  REQUIRE_SHARED_DATA(s);
  const test::OneThread one;
  // Float projections: only summation orders differ (measured 5e-7 on the CPU paths).
  check_model(*load_transformer(s + "/models/tiny-qwen2"), "tiny-qwen2", 1e-4, 2e-2);
}

TEST(Backends, TinyQwen3EveryBackendMatchesTheCpuReference) {
  const std::string dir = test::data_dir() + "/models/";
  if (!std::filesystem::exists(dir + "qwen3-b/config.json"))
    GTEST_SKIP() << "tests/data/models/qwen3-b not present (tools/make_fixture_models.py writes it)";
  const test::OneThread one;
  // Float projections with the per-head q/k norm (head_dim 64, which the GPU's attention takes); qwen3-t: ternary
  // values times group-128 scales in bf16, as Bonsai's unpacked checkpoints, detected and run on the group-scaled
  // ternary kernels everywhere, the head included (the GPU's sums are the CPU's bit for bit; attention and softmax
  // sum in other orders, so activations may move an int8 code: tolerances as tiny-bitnet's).
  check_model(*load_transformer(dir + "qwen3-b"), "qwen3-b", 1e-4, 2e-2);
  const auto t = load_transformer(dir + "qwen3-t");
  ASSERT_NE(dynamic_cast<const TernaryLinear*>(&t->lm_head()), nullptr) << "qwen3-t's head is not ternary";
  check_model(*t, "qwen3-t", 3e-2, 3e-2);
}

TEST(Backends, TernaryFamiliesEveryBackendMatchesTheCpuReference) {
  const std::string dir = test::data_dir() + "/models/";
  if (!std::filesystem::exists(dir + "falcon-a/config.json") || !std::filesystem::exists(dir + "trilm-a/config.json"))
    GTEST_SKIP() << "tests/data/models/falcon-a or trilm-a not present (tools/make_fixture_models.py writes them)";
  const test::OneThread one;
  // falcon-a: Falcon3-1.58bit's bitnet quantization_config on Llama (ternary projections, per-token int8
  // activations); trilm-a: TriLM-style 16-bit {-s, 0, +s} weights, detected and packed at load. Both run the
  // ternary kernels on every backend (one scale per projection); tolerances as tiny-bitnet's (int8 codes of
  // activations that differ in the last bit move logits by up to a few percent of the largest).
  check_model(*load_transformer(dir + "falcon-a"), "falcon-a", 3e-2, 3e-2);
  check_model(*load_transformer(dir + "trilm-a"), "trilm-a", 3e-2, 3e-2);
}

// Ternary post-training quantization with group-128 scales of a model with q/k/v biases (tiny-qwen2, `--quant
// ternary-absmean-g128`): the group-scaled ternary kernels with a bias on every backend.
TEST(Backends, TernaryPtqWithGroupScalesAndBiasEveryBackendMatchesTheCpuReference) {
  REQUIRE_SHARED_DATA(s);
  const test::OneThread one;
  LoadOptions o;
  o.quant = "ternary-absmean-g128";
  const auto m = load_transformer(s + "/models/tiny-qwen2", o);
  const auto* qkv = dynamic_cast<const TernaryLinear*>(m->layers()[0].qkv.get());
  ASSERT_NE(qkv, nullptr);
  EXPECT_TRUE(qkv->has_group_scales());
  EXPECT_FALSE(qkv->bias().empty());
  check_model(*m, "tiny-qwen2 ternary-absmean-g128", 3e-2, 3e-2);
}

// The device memory a backend reports (serve's default tokens per step depends on it): 0 for the CPU, the GPU's
// total for the CUDA backend (every GPU this code supports has more than 1 GiB).
TEST(Backends, DeviceMemoryTotal) {
  const auto m = load_transformer(test::bundled_model());
  EXPECT_EQ(CpuBackend(*m).device_memory_total(), 0u);
  for (const Candidate& cand : candidates()) {
    if (cand.name.rfind("cuda", 0) != 0) continue;
    EXPECT_GT(cand.make(*m)->device_memory_total(), size_t{1} << 30) << cand.name;
  }
}
