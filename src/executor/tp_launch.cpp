#include "executor/tp_launch.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "core/env.h"
#include "core/error.h"
#include "parallel/mpi_comm.h"
#include "parallel/nccl_comm.h"
#include "parallel/shard.h"

namespace tritium {
namespace {

enum Cmd : int32_t { kStop = 0, kForward = 1 };

/// Batch wire format (int32): S, then per chunk T, start_pos, all_logits, table length, num_prompt (-1: every
/// position is a prompt position), tokens[T], table[...].
void serialize(std::span<const BatchChunk> batch, std::vector<int32_t>& w) {
  w.clear();
  w.push_back(static_cast<int32_t>(batch.size()));
  for (const BatchChunk& c : batch) {
    w.push_back(static_cast<int32_t>(c.tokens.size()));
    w.push_back(static_cast<int32_t>(c.start_pos));
    w.push_back(c.all_logits ? 1 : 0);
    w.push_back(static_cast<int32_t>(c.block_table.size()));
    w.push_back(c.num_prompt > INT32_MAX ? -1 : static_cast<int32_t>(c.num_prompt));
    w.insert(w.end(), c.tokens.begin(), c.tokens.end());
    w.insert(w.end(), c.block_table.begin(), c.block_table.end());
  }
}

std::vector<BatchChunk> deserialize(const std::vector<int32_t>& w) {
  std::vector<BatchChunk> b;
  size_t i = 0;
  const int32_t S = w.at(i++);
  for (int32_t s = 0; s < S; ++s) {
    BatchChunk c;
    const size_t T = static_cast<size_t>(w.at(i)), nbt = static_cast<size_t>(w.at(i + 3));
    c.start_pos = w.at(i + 1);
    c.all_logits = w.at(i + 2) != 0;
    const int32_t np = w.at(i + 4);
    if (np >= 0) c.num_prompt = np;
    i += 5;
    TRITIUM_CHECK(i + T + nbt <= w.size(), "tensor parallel: truncated batch message");
    c.tokens = std::span<const int32_t>(w.data() + i, T);
    c.block_table = std::span<const int32_t>(w.data() + i + T, nbt);
    i += T + nbt;
    b.push_back(c);
  }
  return b;
}

/// Rank 0's backend: broadcasts each batch to the workers, then runs its own shard.
class LeaderBackend final : public Backend {
 public:
  LeaderBackend(std::shared_ptr<const Transformer> shard, std::shared_ptr<Backend> inner,
                std::shared_ptr<NcclComm> comm, std::vector<pid_t> workers)
      : Backend(std::move(shard)), inner_(std::move(inner)), comm_(std::move(comm)), workers_(std::move(workers)) {}
  ~LeaderBackend() override {
    try {
      int32_t hdr[4] = {kStop, 0, 0, 0};
      comm_->broadcast_host(hdr, 4, 0);
    } catch (...) {
    }
    // Workers exit right after the stop message; never wait forever on one that hangs in driver teardown.
    for (pid_t p : workers_) {
      int st = 0;
      bool done = false;
      for (int i = 0; i < 1000 && !done; ++i) {  // up to 10 s
        done = waitpid(p, &st, WNOHANG) == p;
        if (!done) usleep(10000);
      }
      if (!done) {
        kill(p, SIGKILL);
        waitpid(p, &st, 0);
      }
    }
  }
  void forward(std::span<const BatchChunk> batch, KvCache& cache, std::vector<float>& logits) override {
    validate_batch(model_->config(), batch, cache);  // a batch the ranks would reject is never broadcast
    serialize(batch, wire_);
    int32_t hdr[4] = {kForward, static_cast<int32_t>(wire_.size()), static_cast<int32_t>(cache.num_blocks()),
                      cache.block_size()};
    comm_->broadcast_host(hdr, 4, 0);
    comm_->broadcast_host(wire_.data(), wire_.size(), 0);
    inner_->forward(batch, cache, logits);
  }
  std::string name() const override { return inner_->name() + " (+" + std::to_string(workers_.size()) + " ranks)"; }
  size_t device_memory_total() const override { return inner_->device_memory_total(); }

 private:
  std::shared_ptr<Backend> inner_;
  std::shared_ptr<NcclComm> comm_;
  std::vector<pid_t> workers_;
  std::vector<int32_t> wire_;
};

/// A worker rank: its shard on GPU `device`, then the loop of broadcast batches until the stop message.
/// `mpi`: the process was started by mpirun (finalize MPI before leaving).
[[noreturn]] void worker_main(const Transformer& full, int rank, int world, const CudaOptions& base, int device,
                              bool mpi) {
  int code = 0;
  try {
    const std::string id = env::tp_nccl_id();
    TRITIUM_CHECK(!id.empty(), "tensor parallel worker: TRITIUM_TP_NCCL_ID is not set");
    std::shared_ptr<const Transformer> shard = shard_transformer(full, rank, world);
    auto comm = std::make_shared<NcclComm>(id, rank, world, device);
    CudaOptions co = base;
    co.device = device;
    co.tp_comm = comm;
    co.copy_logits = false;
    auto backend = make_cuda_backend(shard, co);
    const ModelConfig& c = shard->config();
    std::unique_ptr<KvCache> cache;
    std::vector<int32_t> wire;
    std::vector<float> logits;
    for (;;) {
      int32_t hdr[4] = {0, 0, 0, 0};
      comm->broadcast_host(hdr, 4, 0);
      if (hdr[0] == kStop) {
        // Leave without tearing down NCCL / CUDA objects: ncclCommDestroy may wait for peers that are already
        // gone; the process exit releases the GPU.
        std::fflush(stdout);
        std::fflush(stderr);
        if (mpi) mpi_finalize();
        std::_Exit(0);
      }
      wire.resize(static_cast<size_t>(hdr[1]));
      comm->broadcast_host(wire.data(), wire.size(), 0);
      if (!cache || cache->num_blocks() != hdr[2] || cache->block_size() != hdr[3])
        cache = std::make_unique<KvCache>(KvCacheSpec{c.num_layers, c.num_kv_heads, c.head_dim, hdr[3], hdr[2]});
      const std::vector<BatchChunk> batch = deserialize(wire);
      backend->forward(batch, *cache, logits);
    }
    backend.reset();
    shard.reset();
    cache.reset();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tensor parallel rank %d: %s\n", rank, e.what());
    code = 1;
  }
  std::fflush(stderr);
  if (mpi) mpi_finalize();
  std::_Exit(code);
}

std::vector<std::string> own_command_line() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  const std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> args;
  std::string cur;
  for (char ch : all) {
    if (ch == '\0') {
      args.push_back(cur);
      cur.clear();
    } else {
      cur += ch;
    }
  }
  if (!cur.empty()) args.push_back(cur);
  return args;
}

/// Rank 0's shard on GPU `device`, joined to the NCCL group `id`, wrapped in the broadcasting LeaderBackend.
std::shared_ptr<Backend> make_leader(const Transformer& full, int world, const std::string& id, const CudaOptions& cuda,
                                     int device, std::vector<pid_t> workers) {
  std::shared_ptr<const Transformer> shard = shard_transformer(full, 0, world);
  auto comm = std::make_shared<NcclComm>(id, 0, world, device);
  CudaOptions co = cuda;
  co.device = device;
  co.tp_comm = comm;
  co.copy_logits = true;
  auto inner = make_cuda_backend(shard, co);
  return std::make_shared<LeaderBackend>(shard, std::move(inner), comm, std::move(workers));
}

/// Multi-node path: every process was started by mpirun with the same command line. Rank and world come from
/// MPI, rank 0 creates the NCCL id and MPI_Bcast's it, each process takes GPU (first device + local rank).
std::shared_ptr<Backend> start_under_mpi(const Transformer& full, int world, const CudaOptions& cuda) {
  TRITIUM_CHECK(mpi_available(),
                "--tensor-parallel {} under mpirun: this build has no MPI support (install libopenmpi-dev, rebuild)",
                world);
  const MpiWorld mw = mpi_init();
  TRITIUM_CHECK(mw.size == world,
                "--tensor-parallel {} under mpirun with {} process(es): start exactly one process per rank (mpirun -np {})",
                world, mw.size, world);
  (void)make_tp_plan(full, mw.rank, world);  // the clear error on every rank before any collective
  const int device = cuda.device + mw.local_rank;
  TRITIUM_CHECK(device < cuda_device_count(), "tensor parallel rank {} (local rank {}): no CUDA device {} on this host",
                mw.rank, mw.local_rank, device);
  std::string id = mw.rank == 0 ? NcclComm::new_unique_id_hex() : std::string();
  mpi_broadcast_string(id, 0);
  if (mw.rank > 0) {
    setenv("TRITIUM_TP_NCCL_ID", id.c_str(), 1);
    worker_main(full, mw.rank, world, cuda, device, true);
  }
  return make_leader(full, world, id, cuda, device, {});
}

}  // namespace

bool is_tensor_parallel_worker() { return env::tp_rank() > 0; }

std::shared_ptr<Backend> start_tensor_parallel(const Transformer& full, int world, const CudaOptions& cuda) {
  TRITIUM_CHECK(world >= 2, "--tensor-parallel {}: needs at least 2 ranks", world);
  // NVLink multicast stays off (shared machines): inherited by every rank.
  setenv("NCCL_NVLS_ENABLE", "0", 0);
  setenv("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1", 0);
  setenv("NVSHMEM_DISABLE_NVLS", "1", 0);
  if (is_tensor_parallel_worker()) {
    const int rank = env::tp_rank(), w = env::tp_world();
    if (w != world) {
      std::fprintf(stderr, "tensor parallel rank %d: TRITIUM_TP_WORLD %d differs from --tensor-parallel %d\n", rank,
                   w, world);
      std::_Exit(1);
    }
    worker_main(full, rank, world, cuda, cuda.device + rank, false);
  }
  if (launched_by_mpi()) return start_under_mpi(full, world, cuda);
  const int have = cuda_device_count();
  TRITIUM_CHECK(cuda.device + world <= have, "--tensor-parallel {} on cuda:{}: needs {} GPUs from cuda:{}, found {}",
                world, cuda.device, world, cuda.device, have);
  (void)make_tp_plan(full, 0, world);  // the clear error before any process starts
  const std::string id = NcclComm::new_unique_id_hex();
  const std::vector<std::string> args = own_command_line();
  TRITIUM_CHECK(!args.empty(), "tensor parallel: cannot read /proc/self/cmdline");
  std::vector<pid_t> workers;
  for (int r = 1; r < world; ++r) {
    const pid_t pid = fork();
    TRITIUM_CHECK(pid >= 0, "tensor parallel: fork failed");
    if (pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      setenv("TRITIUM_TP_RANK", std::to_string(r).c_str(), 1);
      setenv("TRITIUM_TP_WORLD", std::to_string(world).c_str(), 1);
      setenv("TRITIUM_TP_NCCL_ID", id.c_str(), 1);
      const int devnull = open("/dev/null", O_RDWR);
      if (devnull >= 0) {
        dup2(devnull, 0);
        dup2(devnull, 1);
      }
      std::vector<char*> argv;
      for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      execv("/proc/self/exe", argv.data());
      std::_Exit(127);
    }
    workers.push_back(pid);
  }
  try {
    return make_leader(full, world, id, cuda, cuda.device, workers);
  } catch (...) {
    for (pid_t p : workers) kill(p, SIGKILL);
    for (pid_t p : workers) waitpid(p, nullptr, 0);
    throw;
  }
}

}  // namespace tritium
