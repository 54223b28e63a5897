// The persistent decode kernel (kernels/cuda/decode_persistent.h) against the layered CUDA forward: the same
// model, prompt and greedy continuation, once with each path, logits compared at every decode step (short
// contexts, and a context past 256 positions where attention is split-K). Skipped without a CUDA device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>

#include "core/error.h"
#include "model/loader.h"
#include "model/synth.h"
#include "runtime/block_allocator.h"
#include "runtime/cuda_backend.h"
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
  std::unique_ptr<Transformer> model;
  std::unique_ptr<KvCache> cache;
};

Path make_path(const std::string& dir, const CudaOptions& o, int max_tokens) {
  Path p;
  p.model = load_transformer(dir);
  p.model->set_backend(make_cuda_backend(*p.model, o));
  const ModelConfig& c = p.model->config();
  p.cache = std::make_unique<KvCache>(
      KvCacheSpec{c.num_layers, c.num_kv_heads, c.head_dim, 16, static_cast<int64_t>((max_tokens + 15) / 16)});
  return p;
}

/// Prefills `prompt_len` tokens on both paths, then decodes `steps` greedy tokens (path a's argmax fed to both)
/// and compares the logits of every step. Default: a = the persistent kernel over weights in persistent_layout,
/// b = the layered kernels (tc2); with la_layout / lb_layout: the layered kernels over the two weight layouts.
void compare(const std::string& dir, int prompt_len, int steps, const char* la_layout = nullptr,
             const char* lb_layout = nullptr, const char* persistent_layout = "tc2") {
  const EnvGuard persistent("TRITIUM_CUDA_PERSISTENT", nullptr), layout("TRITIUM_CUDA_LAYOUT", nullptr);
  CudaOptions oa, ob;
  oa.persistent_decode = la_layout == nullptr;
  oa.ternary_layout = la_layout ? la_layout : persistent_layout;
  if (lb_layout) ob.ternary_layout = lb_layout;
  Path a = make_path(dir, oa, prompt_len + steps);
  Path b = make_path(dir, ob, prompt_len + steps);
  if (!la_layout) {
    ASSERT_NE(a.model->backend()->name().find("persistent decode"), std::string::npos)
        << "the persistent kernel was not planned for this model: " << a.model->backend()->name();
    ASSERT_NE(a.model->backend()->name().find(persistent_layout), std::string::npos) << a.model->backend()->name();
  } else {
    ASSERT_NE(a.model->backend()->name().find(la_layout), std::string::npos) << a.model->backend()->name();
    ASSERT_NE(b.model->backend()->name().find(lb_layout), std::string::npos) << b.model->backend()->name();
  }
  ASSERT_EQ(b.model->backend()->name().find("persistent decode"), std::string::npos);
  const int V = a.model->vocab_size();
  std::vector<int32_t> blocks(static_cast<size_t>(a.cache->spec().num_blocks));
  for (size_t i = 0; i < blocks.size(); ++i) blocks[i] = static_cast<int32_t>(blocks.size() - 1 - i);  // scattered
  std::vector<int32_t> prompt;
  for (int i = 0; i < prompt_len; ++i) prompt.push_back(static_cast<int32_t>((i * 7919 + 13) % V));
  std::vector<float> la, lb;
  BatchChunk pre{prompt, 0, blocks, false};
  a.model->forward({&pre, 1}, *a.cache, la);
  b.model->forward({&pre, 1}, *b.cache, lb);
  int32_t next = argmax(la);
  int identical = 0;
  double worst = 0;
  for (int s = 0; s < steps; ++s) {
    BatchChunk ch{std::span<const int32_t>(&next, 1), prompt_len + s, blocks, false};
    a.model->forward({&ch, 1}, *a.cache, la);
    b.model->forward({&ch, 1}, *b.cache, lb);
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
    next = argmax(la);
  }
  std::printf("[ persistent ] %s vs %s, %s: prompt %d, %d decode steps, %d bit-identical, max |diff| %.3g\n",
              a.model->backend()->name().c_str(), b.model->backend()->name().c_str(), dir.c_str(), prompt_len, steps,
              identical, worst);
}

#define REQUIRE_CUDA() \
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device (or built without CUDA)"

}  // namespace

TEST(CudaPersistentDecode, TinyBitnetMatchesLayered) {
  REQUIRE_CUDA();
  compare(test::bundled_model(), 37, 48);
}

TEST(CudaPersistentDecode, TinyBitnetSplitAttentionMatchesLayered) {
  REQUIRE_CUDA();
  compare(test::bundled_model(), 300, 12);  // contexts past 256: split-K attention items
}

// The persistent kernel over tcb weights (binary tensor-core GEMV, bit planes built in its prologues) against the
// layered tc2 kernels: exact integer sums on both sides, so the same logits.
TEST(CudaPersistentDecode, TinyBitnetTcbMatchesLayeredTc2) {
  REQUIRE_CUDA();
  compare(test::bundled_model(), 37, 48, nullptr, nullptr, "tcb");
  compare(test::bundled_model(), 300, 8, nullptr, nullptr, "tcb");
}

// The two GPU weight layouts (tc2: dp4a / int8 MMA kernels; tcb: binary MMA) through the layered forward: the
// same exact integer sums, so the same logits, in prefill and decode.
TEST(CudaPersistentDecode, TinyBitnetLayoutsTc2AndTcbAgree) {
  REQUIRE_CUDA();
  compare(test::bundled_model(), 37, 24, "tc2", "tcb");
}

TEST(CudaPersistentDecode, Bitnet2b4tWidthsMatchLayered) {
  REQUIRE_CUDA();
  // Two layers of the 2B4T shape (hidden 2560, inter 6912, 20 heads / 5 KV heads of 128): many rows per block,
  // the real shared-memory plan and attention over 20 heads.
  const auto dir = std::filesystem::temp_directory_path() / "tritium_persistent_2b4t";
  SynthOptions so;
  so.num_layers = 2;
  write_synthetic_bitnet(dir.string(), so);
  compare(dir.string(), 29, 16);
  compare(dir.string(), 280, 6);
  compare(dir.string(), 29, 8, "tc2", "tcb");  // the tcb kernels at 2B4T widths (K split over 3 warps on down)
  // The persistent kernel over tcb weights: 7 tiles per block on gate_up (one warp each), 2 on the others (4 warps
  // each, K split), 20 attention heads.
  compare(dir.string(), 29, 12, nullptr, nullptr, "tcb");
  std::filesystem::remove_all(dir);
}

// A 2B4T-width layer with an MLP width that is not a multiple of 16 or 256 (6900): gate_up ends in a partial
// 16-row tile (13800 rows) and down's K is padded (6900 -> 6912), so the tcb paths' padded rows, -1 counts and
// planes and the row guards of the stores run; the persistent kernel over tcb against the layered tc2 forward.
TEST(CudaPersistentDecode, PaddedWidthsTcbMatchLayered) {
  REQUIRE_CUDA();
  const auto dir = std::filesystem::temp_directory_path() / "tritium_persistent_padded";
  SynthOptions so;
  so.num_layers = 2;
  so.intermediate_size = 6900;
  write_synthetic_bitnet(dir.string(), so);
  compare(dir.string(), 29, 8, nullptr, nullptr, "tcb");
  compare(dir.string(), 29, 8, "tc2", "tcb");
  std::filesystem::remove_all(dir);
}

// CudaOptions::ternary_layout "auto": tcb for one sequence at a time (generate / chat), tc2 otherwise; an explicit
// layout or TRITIUM_CUDA_LAYOUT wins.
TEST(CudaLayout, AutoPicksTcbForOneSequence) {
  REQUIRE_CUDA();
#if TRITIUM_HAVE_CUDA
  if (!cuda::tcb_supported()) GTEST_SKIP() << "the tcb layout needs sm_80 or newer";
#endif
  const EnvGuard persistent("TRITIUM_CUDA_PERSISTENT", nullptr), layout("TRITIUM_CUDA_LAYOUT", nullptr);
  auto name = [](const CudaOptions& o) {
    auto m = load_transformer(test::bundled_model());
    m->set_backend(make_cuda_backend(*m, o));
    return m->backend()->name();
  };
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
