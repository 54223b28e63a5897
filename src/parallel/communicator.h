// tritium parallel: host-side collectives between the ranks of a tensor-parallel group.
//
// The CPU forward of a shard calls these on host buffers. make_local_group() returns a group of `world`
// communicators for threads of one process (the CPU proof of the partitioning, tests/parallel/test_tensor_parallel.cpp);
// the GPU path uses NCCL on device buffers instead (parallel/nccl_comm.h).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

namespace tritium {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int world() const = 0;
  /// In-place sum over ranks of float32 [n]; every rank receives the same bits (ranks summed in rank order).
  virtual void all_reduce_sum(float* data, int64_t n) = 0;
  /// recv [world * n] = the ranks' send [n] buffers, concatenated in rank order.
  virtual void all_gather(const float* send, int64_t n, float* recv) = 0;
};

/// `world` communicators of one group, to be used from `world` threads (one each). Collectives block until
/// every rank has called them.
std::vector<std::shared_ptr<Communicator>> make_local_group(int world);

/// Gathers a column-split matrix: local [M, widths[rank]] on each rank -> full [M, sum(widths)] (rank blocks side
/// by side), through one all_gather of blocks padded to max(widths).
void all_gather_columns(Communicator& comm, const float* local, int64_t M, const std::vector<int64_t>& widths,
                        float* full);

}  // namespace tritium
