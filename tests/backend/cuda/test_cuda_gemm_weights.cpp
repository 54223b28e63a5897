// CudaOptions::gemm_weights: the ternary GEMMs of more than 16 rows read the packed 2-bit weights (our tiled GEMM)
// or an int8 copy (cuBLASLt's int8 GEMM, the epilogue applied by ternary_epilogue or by the next row kernel). Both
// compute the same exact integer sums and the same float operations after them, so a batch gives the same logits
// bit for bit: a prefill of 20 sequences in one forward, then decode steps of 20 rows (eager, captured, replayed as
// a CUDA graph), on the bundled tiny-bitnet and on two layers of the 2B4T widths with an MLP width that is not a
// multiple of 16 (padded rows, the fallback paths of the row kernels). Skipped without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "core/error.h"
#include "kv/block_allocator.h"
#include "model/loader.h"
#include "model/synth.h"
#include "test_util.h"

using namespace tritium;

namespace {

#define REQUIRE_GPU_DEVICE() \
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device (or built without CUDA)"

int argmax(const float* v, int n) { return static_cast<int>(std::max_element(v, v + n) - v); }

void compare(const std::string& dir) {
  auto model = std::shared_ptr<const Transformer>(load_transformer(dir));
  CudaOptions op, oi;
  op.gemm_weights = "packed";
  oi.gemm_weights = "int8";
  auto packed = make_cuda_backend(model, op), int8 = make_cuda_backend(model, oi);
  ASSERT_EQ(packed->name().find("int8 GEMM"), std::string::npos) << packed->name();
  ASSERT_NE(int8->name().find("int8 GEMM"), std::string::npos) << int8->name();
  const ModelConfig& c = model->config();
  const int S = 20, steps = 4, V = c.vocab_size, per_seq = 3;  // blocks of 16 tokens per sequence
  const KvCacheSpec spec{c.num_layers, c.num_kv_heads, c.head_dim, 16, static_cast<int64_t>(S) * per_seq};
  KvCache kp(spec), ki(spec);
  std::vector<std::vector<int32_t>> prompts(S), tables(S);
  for (int s = 0; s < S; ++s) {
    for (int t = 0; t < 3 + s; ++t) prompts[s].push_back(static_cast<int32_t>((s * 131 + t * 7919 + 13) % V));
    for (int b = 0; b < per_seq; ++b) tables[s].push_back(static_cast<int32_t>(S * per_seq - 1 - (s * per_seq + b)));
  }
  std::vector<float> lp, li;
  std::vector<BatchChunk> batch;
  for (int s = 0; s < S; ++s) batch.push_back({prompts[s], 0, tables[s], false});
  packed->forward(batch, kp, lp);  // 250 rows
  int8->forward(batch, ki, li);
  ASSERT_EQ(lp.size(), static_cast<size_t>(S) * V);
  ASSERT_EQ(lp, li) << dir << ": prefill";
  std::vector<int32_t> next(S);
  for (int step = 0; step < steps; ++step) {
    batch.clear();
    for (int s = 0; s < S; ++s) {
      next[s] = argmax(&lp[static_cast<size_t>(s) * V], V);
      batch.push_back({std::span<const int32_t>(&next[s], 1), static_cast<int64_t>(prompts[s].size()) + step,
                       tables[s], false});
    }
    packed->forward(batch, kp, lp);  // 20 rows: the int8 GEMM on the other backend
    int8->forward(batch, ki, li);
    ASSERT_EQ(lp, li) << dir << ": decode step " << step;
  }
}

}  // namespace

TEST(CudaGemmWeights, PackedAndInt8GiveTheSameLogitsTinyBitnet) {
  REQUIRE_GPU_DEVICE();
  compare(test::bundled_model());
}

TEST(CudaGemmWeights, PackedAndInt8GiveTheSameLogitsPadded2b4tWidths) {
  REQUIRE_GPU_DEVICE();
  const auto dir = std::filesystem::temp_directory_path() / "tritium_gemm_weights_2b4t";
  SynthOptions so;
  so.num_layers = 2;
  so.intermediate_size = 6900;
  write_synthetic_bitnet(dir.string(), so);
  compare(dir.string());
  std::filesystem::remove_all(dir);
}

// "auto": the int8 copy when the engine batches (its size is a sliver of the GPU here), not for one sequence at a
// time; explicit values win; anything else is an error.
TEST(CudaGemmWeights, AutoPicksTheInt8CopyWhenBatching) {
  REQUIRE_GPU_DEVICE();
  auto model = load_transformer(test::bundled_model());
  auto name = [&](const CudaOptions& o) { return make_cuda_backend(*model, o)->name(); };
  CudaOptions o;
  EXPECT_NE(name(o).find("+int8 GEMM weights"), std::string::npos);
  o.single_sequence = true;
  EXPECT_EQ(name(o).find("int8 GEMM"), std::string::npos);
  o.gemm_weights = "int8";
  EXPECT_NE(name(o).find("+int8 GEMM weights"), std::string::npos);
  o.single_sequence = false;
  o.gemm_weights = "packed";
  EXPECT_EQ(name(o).find("int8 GEMM"), std::string::npos);
  o.gemm_weights = "bogus";
  EXPECT_THROW(name(o), Error);
}
