// tritium parallel: NCCL collectives on device buffers for the tensor-parallel CUDA path.
//
// libnccl.so.2 is loaded at run time (dlopen; LD_LIBRARY_PATH or the system's library path must hold it: the CUDA
// toolkit's lib folder or the nvidia-nccl-cu13 Python package's nvidia/nccl/lib), so a build needs only nccl.h.
// One communicator per process and GPU; ranks join with the ncclUniqueId that rank 0 created (new_unique_id_hex),
// passed as hex text (environment variable or MPI_Bcast). This header needs no CUDA or NCCL headers; in a build
// without them every function throws tritium::Error.
//
// NVLink multicast (NVLS) must stay off on shared machines: the caller exports NCCL_NVLS_ENABLE=0 (the launcher
// in executor/tp_launch.cpp sets it when absent) and nothing here creates multicast objects.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace tritium {

class NcclComm {
 public:
  /// A fresh ncclUniqueId as 256 hex characters. Throws when NCCL cannot be loaded.
  static std::string new_unique_id_hex();
  /// Joins the group (ncclCommInitRank on `device`, blocking until every rank joined).
  NcclComm(const std::string& id_hex, int rank, int world, int device);
  ~NcclComm();
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;
  int rank() const { return rank_; }
  int world() const { return world_; }
  /// In-place sum of float32 [n] on `stream` (a cudaStream_t). Capturable in a CUDA graph.
  void all_reduce_sum(float* data, size_t n, void* stream);
  /// recv [world * bytes] = every rank's send [bytes], in rank order, on `stream`.
  void all_gather(const void* send, size_t bytes, void* recv, void* stream);
  /// Broadcasts int32 [n] host data from `root` (blocking; through a device staging buffer on an own stream).
  /// The root waits at most TRITIUM_TP_TIMEOUT seconds (see wait()).
  void broadcast_host(int32_t* data, size_t n, int root);
  /// Blocks until the work queued on `stream` (a cudaStream_t) has finished. Throws tritium::Error, after
  /// aborting the communicator (ncclCommAbort; later collectives then throw too), when NCCL reports an
  /// asynchronous error (ncclCommGetAsyncError) or when it takes longer than timeout_s (<= 0: no limit): a rank
  /// that died or hangs never leaves the others waiting forever.
  void wait(void* stream, const char* what, double timeout_s);

 private:
  void* comm_ = nullptr;     // ncclComm_t
  void* stream_ = nullptr;   // cudaStream_t for broadcast_host
  void* staging_ = nullptr;  // device int32 buffer
  size_t staging_cap_ = 0;
  int rank_ = 0, world_ = 1, device_ = 0;
};

}  // namespace tritium
