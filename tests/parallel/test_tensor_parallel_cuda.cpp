// Tensor parallelism on GPUs over NCCL: two ranks as two threads of this process (one GPU and one NCCL
// communicator each) against the unsharded CUDA backend. Skipped without 2 GPUs or without NCCL.
#include <gtest/gtest.h>

#include <cmath>
#include <thread>

#include "core/error.h"
#include "model/loader.h"
#include "parallel/nccl_comm.h"
#include "parallel/shard.h"
#include "backend/cuda/cuda_backend.h"
#include "test_util.h"

using namespace tritium;

namespace {

void run_case(const std::string& dir) {
  if (cuda_device_count() < 2) GTEST_SKIP() << "needs 2 CUDA devices (found " << cuda_device_count() << ")";
  std::string id;
  try {
    id = NcclComm::new_unique_id_hex();
  } catch (const Error& e) {
    GTEST_SKIP() << e.what();
  }
  auto full = load_transformer(dir);
  auto ref_model = make_cuda_backend(std::shared_ptr<const Transformer>(load_transformer(dir)));
  const int64_t V = full->vocab_size();
  const int world = 2;
  std::vector<std::shared_ptr<Backend>> shards(world);  // each rank's shard on its GPU
  std::vector<std::shared_ptr<NcclComm>> comms(world);
  {
    std::vector<std::thread> th;
    std::vector<std::string> errs(world);
    for (int r = 0; r < world; ++r)
      th.emplace_back([&, r] {
        try {
          std::shared_ptr<const Transformer> shard = shard_transformer(*full, r, world);
          comms[r] = std::make_shared<NcclComm>(id, r, world, r);
          CudaOptions co;
          co.device = r;
          co.tp_comm = comms[r];
          shards[r] = make_cuda_backend(shard, co);
        } catch (const std::exception& e) {
          errs[r] = e.what();
        }
      });
    for (auto& t : th) t.join();
    for (const auto& e : errs) ASSERT_EQ(e, "");
  }
  const ModelConfig& c = full->config();
  KvCache ref_cache(KvCacheSpec{c.num_layers, c.num_kv_heads, c.head_dim, 16, 8});
  std::vector<std::unique_ptr<KvCache>> caches;
  for (int r = 0; r < world; ++r) {
    const ModelConfig& sc = shards[r]->model().config();
    caches.push_back(std::make_unique<KvCache>(KvCacheSpec{sc.num_layers, sc.num_kv_heads, sc.head_dim, 16, 8}));
  }
  std::vector<int32_t> table = {3, 1, 4, 0, 5, 2, 7, 6};
  std::vector<int32_t> prompt;
  for (int i = 0; i < 37; ++i) prompt.push_back(static_cast<int32_t>((i * 7919 + 13) % V));
  auto step = [&](const BatchChunk& ch) {
    std::vector<std::vector<float>> out(world);
    std::vector<std::string> errs(world);
    std::vector<std::thread> th;
    for (int r = 0; r < world; ++r)
      th.emplace_back([&, r] {
        try {
          shards[r]->forward({&ch, 1}, *caches[r], out[r]);
        } catch (const std::exception& e) {
          errs[r] = e.what();
        }
      });
    for (auto& t : th) t.join();
    for (const auto& e : errs) EXPECT_EQ(e, "");
    EXPECT_EQ(out[0], out[1]);
    return out[0];
  };
  auto argmax = [&](const float* v) {
    return static_cast<int32_t>(std::max_element(v, v + V) - v);
  };
  BatchChunk pre{prompt, 0, table, true};
  std::vector<float> ref;
  ref_model->forward({&pre, 1}, ref_cache, ref);
  std::vector<float> got = step(pre);
  ASSERT_EQ(ref.size(), got.size());
  double maxd = 0, maxa = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    maxd = std::max(maxd, static_cast<double>(std::fabs(ref[i] - got[i])));
    maxa = std::max(maxa, static_cast<double>(std::fabs(ref[i])));
  }
  std::printf("tp2 vs tp1 prefill: max |dlogit| %.3g (max |logit| %.3g)\n", maxd, maxa);
  EXPECT_LT(maxd, 2e-3 * maxa);
  for (size_t t = 0; t < prompt.size(); ++t) EXPECT_EQ(argmax(&ref[t * V]), argmax(&got[t * V])) << "position " << t;
  // Greedy decode of 24 tokens (CUDA graphs from the third step on).
  std::vector<int32_t> a{argmax(&ref[(prompt.size() - 1) * V])}, b{argmax(&got[(prompt.size() - 1) * V])};
  for (int t = 0; t < 24; ++t) {
    const int64_t pos = static_cast<int64_t>(prompt.size()) + t;
    BatchChunk ca{std::span<const int32_t>(&a.back(), 1), pos, table, false};
    BatchChunk cb{std::span<const int32_t>(&b.back(), 1), pos, table, false};
    ref_model->forward({&ca, 1}, ref_cache, ref);
    got = step(cb);
    a.push_back(argmax(ref.data()));
    b.push_back(argmax(got.data()));
  }
  EXPECT_EQ(a, b) << "greedy continuation differs";
  for (int r = 0; r < world; ++r) shards[r].reset();
}

}  // namespace

TEST(TensorParallelCuda, TinyBitnetTwoGpus) { run_case(test::bundled_model()); }

TEST(TensorParallelCuda, TinyQwen2TwoGpus) {
  REQUIRE_SHARED_DATA(shared);
  run_case(shared + "/models/tiny-qwen2");
}
