// The two GPU layouts of ternary weights (docs/formats.md, "GPU weight layouts (tc2, tcb)"): tc2 (dp4a / int8 MMA
// kernels) and tcb (binary tensor-core MMA GEMV for one-token rows, the tc2 kernels on a rewritten copy for more)
// through the same CUDA forward. Both compute exact integer sums, so the same model, prompt and greedy continuation
// give the same logits at the prefill and at every decode step (prompts of 2-16 tokens and longer ones, a context
// past 256 positions where attention is split-K, the 2B4T widths, and padded widths). Skipped without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>

#include "backend/cuda/cuda_backend.h"
#include "core/error.h"
#include "kv/block_allocator.h"
#include "model/loader.h"
#include "model/synth.h"
#include "test_util.h"

#if TRITIUM_HAVE_CUDA
#include "kernels/cuda/kernels.h"
#endif

using namespace tritium;

namespace {

int argmax(const std::vector<float>& v) {
  return static_cast<int>(std::max_element(v.begin(), v.end()) - v.begin());
}

/// Sets (or, with nullptr, unsets) an environment variable for its scope and restores the caller's value after it,
/// also when an assertion ends the test early.
class EnvGuard {
 public:
  EnvGuard(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    set(value);
  }
  ~EnvGuard() { set(had_ ? old_.c_str() : nullptr); }
  void set(const char* value) const {
    if (value) setenv(name_, value, 1);
    else unsetenv(name_);
  }

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

struct Path {
  std::shared_ptr<Backend> backend;
  std::unique_ptr<KvCache> cache;
};

Path make_path(const std::string& dir, const CudaOptions& o, int max_tokens) {
  Path p;
  p.backend = make_cuda_backend(std::shared_ptr<const Transformer>(load_transformer(dir)), o);
  const ModelConfig& c = p.backend->model().config();
  p.cache = std::make_unique<KvCache>(
      KvCacheSpec{c.num_layers, c.num_kv_heads, c.head_dim, 16, static_cast<int64_t>((max_tokens + 15) / 16)});
  return p;
}

/// Prefills `prompt_len` tokens on both layouts, then decodes `steps` greedy tokens (the tc2 argmax fed to both)
/// and compares the logits of the prefill and of every step.
void compare(const std::string& dir, int prompt_len, int steps) {
  const EnvGuard layout("TRITIUM_CUDA_LAYOUT", nullptr);
  CudaOptions oa, ob;
  oa.ternary_layout = "tc2";
  ob.ternary_layout = "tcb";
  Path a = make_path(dir, oa, prompt_len + steps);
  Path b = make_path(dir, ob, prompt_len + steps);
  ASSERT_NE(a.backend->name().find("tc2"), std::string::npos) << a.backend->name();
  ASSERT_NE(b.backend->name().find("tcb"), std::string::npos) << b.backend->name();
  const int V = a.backend->model().vocab_size();
  std::vector<int32_t> blocks(static_cast<size_t>(a.cache->spec().num_blocks));
  for (size_t i = 0; i < blocks.size(); ++i) blocks[i] = static_cast<int32_t>(blocks.size() - 1 - i);  // scattered
  std::vector<int32_t> prompt;
  for (int i = 0; i < prompt_len; ++i) prompt.push_back(static_cast<int32_t>((i * 7919 + 13) % V));
  std::vector<float> la, lb;
  int identical = 0;
  double worst = 0;
  // Step -1 is the prefill (the prompt in one chunk: the tcb layout runs it on a rewritten tc2 copy).
  auto check_step = [&](int s) {
    ASSERT_EQ(la.size(), static_cast<size_t>(V));
    ASSERT_EQ(lb.size(), static_cast<size_t>(V));
    float scale = 0, diff = 0;
    for (int v = 0; v < V; ++v) {
      scale = std::max(scale, std::fabs(lb[v]));
      diff = std::max(diff, std::fabs(la[v] - lb[v]));
    }
    ASSERT_TRUE(std::isfinite(diff)) << "step " << s;
    // The same float operations in the same order: expected bit-identical; 1e-4 of the logit range allows a
    // last-bit difference of the double sum of squares to flip one int8 rounding.
    EXPECT_LE(diff, 1e-4f * scale) << "step " << s;
    EXPECT_EQ(argmax(la), argmax(lb)) << "step " << s;
    identical += diff == 0.0f;
    worst = std::max<double>(worst, diff);
  };
  BatchChunk pre{prompt, 0, blocks, false};
  a.backend->forward({&pre, 1}, *a.cache, la);
  b.backend->forward({&pre, 1}, *b.cache, lb);
  check_step(-1);
  int32_t next = argmax(la);
  for (int s = 0; s < steps; ++s) {
    BatchChunk ch{std::span<const int32_t>(&next, 1), prompt_len + s, blocks, false};
    a.backend->forward({&ch, 1}, *a.cache, la);
    b.backend->forward({&ch, 1}, *b.cache, lb);
    check_step(s);
    next = argmax(la);
  }
  std::printf("[ layouts ] %s vs %s, %s: prompt %d, %d decode steps, %d of %d steps bit-identical, max |diff| %.3g\n",
              a.backend->name().c_str(), b.backend->name().c_str(), dir.c_str(), prompt_len, steps, identical,
              steps + 1, worst);
}

#define REQUIRE_TCB()                                                                          \
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device (or built without CUDA)"; \
  if (!tcb_supported()) GTEST_SKIP() << "the tcb layout needs sm_80 or newer"

bool tcb_supported() {
#if TRITIUM_HAVE_CUDA
  return cuda::tcb_supported();
#else
  return false;
#endif
}

}  // namespace

TEST(CudaLayouts, TinyBitnetTc2AndTcbAgree) {
  REQUIRE_TCB();
  compare(test::bundled_model(), 37, 24);
  compare(test::bundled_model(), 5, 8);    // a prompt of 2-16 tokens: the int8 MMA GEMV on the rewritten tc2 copy
  compare(test::bundled_model(), 300, 8);  // contexts past 256: split-K attention
}

// Two layers of the 2B4T shape (hidden 2560, inter 6912, 20 heads / 5 KV heads of 128): the tcb kernels at 2B4T
// widths (K split over 3 warps on down).
TEST(CudaLayouts, Bitnet2b4tWidthsAgree) {
  REQUIRE_TCB();
  const auto dir = std::filesystem::temp_directory_path() / "tritium_layouts_2b4t";
  SynthOptions so;
  so.num_layers = 2;
  write_synthetic_bitnet(dir.string(), so);
  compare(dir.string(), 29, 8);
  std::filesystem::remove_all(dir);
}

// A 2B4T-width layer with an MLP width that is not a multiple of 16 or 256 (6900): gate_up ends in a partial
// 16-row tile (13800 rows) and down's K is padded (6900 -> 6912), so the tcb path's padded rows, -1 counts and
// planes and the row guards of the stores run.
TEST(CudaLayouts, PaddedWidthsAgree) {
  REQUIRE_TCB();
  const auto dir = std::filesystem::temp_directory_path() / "tritium_layouts_padded";
  SynthOptions so;
  so.num_layers = 2;
  so.intermediate_size = 6900;
  write_synthetic_bitnet(dir.string(), so);
  compare(dir.string(), 29, 8);
  std::filesystem::remove_all(dir);
}

// CudaOptions::ternary_layout "auto": tcb for one sequence at a time (generate / chat), tc2 otherwise; an explicit
// layout or TRITIUM_CUDA_LAYOUT wins.
TEST(CudaLayouts, AutoPicksTcbForOneSequence) {
  REQUIRE_TCB();
  EnvGuard layout("TRITIUM_CUDA_LAYOUT", nullptr);
  auto model = load_transformer(test::bundled_model());
  auto name = [&](const CudaOptions& o) { return make_cuda_backend(*model, o)->name(); };
  CudaOptions o;
  EXPECT_NE(name(o).find(" tc2"), std::string::npos);
  o.single_sequence = true;
  EXPECT_NE(name(o).find(" tcb"), std::string::npos);
  o.ternary_layout = "tc2";
  EXPECT_NE(name(o).find(" tc2"), std::string::npos);
  o.ternary_layout = "auto";
  layout.set("tc2");
  EXPECT_NE(name(o).find(" tc2"), std::string::npos);
  layout.set("bogus");
  EXPECT_THROW(name(o), Error);
}
