// MPI (multi-node tensor-parallel bootstrap, src/parallel/mpi_comm.h). These tests run as two processes under
// mpirun (CTest `mpi_tensor_parallel`: mpiexec -n 2 tritium_tests --gtest_filter=Mpi*) and skip otherwise:
// collectives over MPI_COMM_WORLD, the string broadcast that carries the NCCL unique id, and a tensor-parallel
// shard per process (CPU forward over the MPI communicator) against the unsharded model.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <thread>

#include "core/error.h"
#include "core/parallel.h"
#include "model/loader.h"
#include "parallel/mpi_comm.h"
#include "parallel/shard.h"
#include "test_util.h"

using namespace tritium;

namespace {

#define REQUIRE_MPI_WORLD_OF_2()                                                        \
  if (!mpi_available() || !launched_by_mpi()) GTEST_SKIP() << "not started by mpirun"; \
  const MpiWorld mw = mpi_init();                                                      \
  if (mw.size != 2) GTEST_SKIP() << "needs exactly 2 MPI processes, got " << mw.size

TEST(MpiBootstrap, NotAvailableGivesAClearError) {
  if (mpi_available()) GTEST_SKIP() << "this build has MPI";
  std::string s = "x";
  EXPECT_THROW(mpi_broadcast_string(s, 0), Error);
  EXPECT_THROW(make_mpi_communicator(), Error);
}

TEST(MpiCollectives, GatherReduceBroadcast) {
  REQUIRE_MPI_WORLD_OF_2();
  auto comm = make_mpi_communicator();
  EXPECT_EQ(comm->rank(), mw.rank);
  EXPECT_EQ(comm->world(), 2);
  // all_gather: rank blocks in rank order.
  std::vector<float> mine(37), all(74);
  for (int i = 0; i < 37; ++i) mine[i] = static_cast<float>(mw.rank * 1000 + i);
  comm->all_gather(mine.data(), 37, all.data());
  for (int r = 0; r < 2; ++r)
    for (int i = 0; i < 37; ++i) EXPECT_EQ(all[r * 37 + i], static_cast<float>(r * 1000 + i));
  // all_reduce_sum: rank 0's value + rank 1's value in that order, the same bits on both ranks.
  std::vector<float> v(1001);
  auto val = [](int r, int i) { return std::sin(0.37f * static_cast<float>(i) + static_cast<float>(r)) * 1e3f; };
  for (int i = 0; i < 1001; ++i) v[i] = val(mw.rank, i);
  comm->all_reduce_sum(v.data(), 1001);
  for (int i = 0; i < 1001; ++i) EXPECT_EQ(v[i], val(0, i) + val(1, i)) << i;
  // The NCCL bootstrap broadcast: rank 0's 256-character id reaches rank 1.
  std::string id = mw.rank == 0 ? std::string(128, 'a') + std::string(128, '7') : std::string();
  mpi_broadcast_string(id, 0);
  EXPECT_EQ(id, std::string(128, 'a') + std::string(128, '7'));
  EXPECT_GE(mw.local_rank, 0);
  EXPECT_LT(mw.local_rank, 2);
}

/// One shard per MPI process (CPU forward, collectives over MPI) vs the unsharded model in the same process:
/// prefill logits of a prompt that rank 0 broadcasts, then greedy decode steps.
void shard_per_process(const Transformer& full, bool exact, double rel_tol) {
  const MpiWorld mw = mpi_init();
  const int saved = num_threads();
  set_num_threads(1);
  auto shard = std::make_shared<CpuBackend>(
      std::shared_ptr<const Transformer>(shard_transformer(full, mw.rank, mw.size)), make_mpi_communicator());
  // The prompt comes from rank 0 (as the leader broadcasts each step's batch).
  std::string wire;
  if (mw.rank == 0) {
    std::mt19937 rng(11);
    for (int i = 0; i < 30; ++i) wire += std::to_string(rng() % static_cast<uint32_t>(full.vocab_size())) + " ";
  }
  mpi_broadcast_string(wire, 0);
  std::vector<int32_t> prompt;
  for (size_t p = 0; p < wire.size();) {
    const size_t q = wire.find(' ', p);
    prompt.push_back(std::stoi(wire.substr(p, q - p)));
    p = q + 1;
  }
  ASSERT_EQ(prompt.size(), 30u);
  const ModelConfig& c = full.config();
  const ModelConfig& sc = shard->model().config();
  KvCache cache_full(KvCacheSpec{c.num_layers, c.num_kv_heads, c.head_dim, 16, 8});
  KvCache cache_shard(KvCacheSpec{sc.num_layers, sc.num_kv_heads, sc.head_dim, 16, 8});
  std::vector<int32_t> table{3, 1, 4, 0, 5, 2, 7, 6};
  BatchChunk ch{prompt, 0, table, true};
  std::vector<float> ref, got;
  CpuBackend(full).forward({&ch, 1}, cache_full, ref);
  shard->forward({&ch, 1}, cache_shard, got);
  ASSERT_EQ(ref.size(), got.size());
  double maxd = 0, maxa = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    maxd = std::max(maxd, static_cast<double>(std::fabs(ref[i] - got[i])));
    maxa = std::max(maxa, static_cast<double>(std::fabs(ref[i])));
  }
  if (exact) {
    EXPECT_EQ(maxd, 0.0);
  } else {
    EXPECT_LT(maxd / maxa, rel_tol);
  }
  const int64_t V = full.vocab_size();
  auto argmax = [V](const float* p) { return static_cast<int32_t>(std::max_element(p, p + V) - p); };
  int32_t a = argmax(&ref[(prompt.size() - 1) * V]), b = argmax(&got[(prompt.size() - 1) * V]);
  for (int t = 0; t < 8; ++t) {
    ASSERT_EQ(a, b) << "greedy step " << t;
    const int64_t pos = static_cast<int64_t>(prompt.size()) + t;
    BatchChunk ca{std::span<const int32_t>(&a, 1), pos, table, false};
    CpuBackend(full).forward({&ca, 1}, cache_full, ref);
    shard->forward({&ca, 1}, cache_shard, got);
    if (exact) {
      EXPECT_EQ(ref, got) << "decode step " << t;
    }
    a = argmax(ref.data());
    b = argmax(got.data());
  }
  set_num_threads(saved);
}

TEST(MpiTensorParallel, TinyBitnetShardPerProcessBitIdentical) {
  REQUIRE_MPI_WORLD_OF_2();
  auto full = load_transformer(test::bundled_model());
  shard_per_process(*full, true, 0);
}

TEST(MpiTensorParallel, TinyQwen2ShardPerProcess) {
  REQUIRE_MPI_WORLD_OF_2();
  REQUIRE_SHARED_DATA(shared);
  auto full = load_transformer(shared + "/models/tiny-qwen2");
  shard_per_process(*full, false, 1e-5);
}

}  // namespace

// A rank that hangs must not hang the group: with TRITIUM_TP_TIMEOUT=2 rank 0's all_gather gives up after ~2 s,
// prints which collective timed out and aborts the job (CTest `mpi_dead_worker` checks the message and that
// mpirun ends well within its timeout). Runs only when TRITIUM_TEST_DEAD_WORKER is set: it ends the MPI job.
TEST(MpiDeadWorker, LeaderAbortsInsteadOfHanging) {
  if (!std::getenv("TRITIUM_TEST_DEAD_WORKER")) GTEST_SKIP() << "TRITIUM_TEST_DEAD_WORKER not set";
  REQUIRE_MPI_WORLD_OF_2();
  auto comm = make_mpi_communicator();
  std::vector<float> mine(8, 1.0f), all(16);
  comm->all_gather(mine.data(), 8, all.data());  // both ranks healthy
  if (mw.rank == 1) std::this_thread::sleep_for(std::chrono::seconds(120));  // hangs
  comm->all_gather(mine.data(), 8, all.data());  // rank 0 aborts here
  ADD_FAILURE() << "the all_gather with a hanging rank returned";
}
