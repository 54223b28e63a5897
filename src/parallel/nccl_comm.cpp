#include "parallel/nccl_comm.h"

#include "core/error.h"

#if TRITIUM_HAVE_CUDA && TRITIUM_HAVE_NCCL
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <thread>

#include "core/env.h"

#include "kernels/cuda/kernels.h"

namespace tritium {
namespace {

/// The NCCL entry points, resolved once from libnccl.so.2.
struct NcclApi {
  const char* (*GetErrorString)(ncclResult_t) = nullptr;
  ncclResult_t (*GetUniqueId)(ncclUniqueId*) = nullptr;
  ncclResult_t (*CommInitRank)(ncclComm_t*, int, ncclUniqueId, int) = nullptr;
  ncclResult_t (*CommDestroy)(ncclComm_t) = nullptr;
  ncclResult_t (*CommAbort)(ncclComm_t) = nullptr;
  ncclResult_t (*AllReduce)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*AllGather)(const void*, void*, size_t, ncclDataType_t, ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*Broadcast)(const void*, void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*GetVersion)(int*) = nullptr;
  ncclResult_t (*CommGetAsyncError)(ncclComm_t, ncclResult_t*) = nullptr;
};

const NcclApi& api() {
  static NcclApi a;
  static std::once_flag once;
  static std::string error;
  std::call_once(once, [] {
    void* h = dlopen("libnccl.so.2", RTLD_NOW | RTLD_GLOBAL);
    if (!h) h = dlopen("libnccl.so", RTLD_NOW | RTLD_GLOBAL);
    if (!h) {
      error = std::string("tensor parallel: cannot load libnccl.so.2 (") + dlerror() +
              "); put NCCL's lib folder on LD_LIBRARY_PATH (e.g. python3's site-packages/nvidia/nccl/lib)";
      return;
    }
    auto sym = [&](const char* name) {
      void* p = dlsym(h, name);
      if (!p && error.empty()) error = std::string("tensor parallel: libnccl.so.2 lacks ") + name;
      return p;
    };
    a.GetErrorString = reinterpret_cast<decltype(a.GetErrorString)>(sym("ncclGetErrorString"));
    a.GetUniqueId = reinterpret_cast<decltype(a.GetUniqueId)>(sym("ncclGetUniqueId"));
    a.CommInitRank = reinterpret_cast<decltype(a.CommInitRank)>(sym("ncclCommInitRank"));
    a.CommDestroy = reinterpret_cast<decltype(a.CommDestroy)>(sym("ncclCommDestroy"));
    a.CommAbort = reinterpret_cast<decltype(a.CommAbort)>(dlsym(h, "ncclCommAbort"));
    a.AllReduce = reinterpret_cast<decltype(a.AllReduce)>(sym("ncclAllReduce"));
    a.AllGather = reinterpret_cast<decltype(a.AllGather)>(sym("ncclAllGather"));
    a.Broadcast = reinterpret_cast<decltype(a.Broadcast)>(sym("ncclBroadcast"));
    a.GetVersion = reinterpret_cast<decltype(a.GetVersion)>(sym("ncclGetVersion"));
    a.CommGetAsyncError = reinterpret_cast<decltype(a.CommGetAsyncError)>(sym("ncclCommGetAsyncError"));
  });
  if (!error.empty()) fail("{}", error);
  return a;
}

void check_nccl(ncclResult_t r, const char* what) {
  if (r != ncclSuccess) fail("NCCL error in {}: {}", what, api().GetErrorString(r));
}

}  // namespace

std::string NcclComm::new_unique_id_hex() {
  ncclUniqueId id;
  check_nccl(api().GetUniqueId(&id), "ncclGetUniqueId");
  static const char* hex = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < sizeof(id.internal); ++i) {
    const auto b = static_cast<unsigned char>(id.internal[i]);
    s += hex[b >> 4];
    s += hex[b & 15];
  }
  return s;
}

NcclComm::NcclComm(const std::string& id_hex, int rank, int world, int device)
    : rank_(rank), world_(world), device_(device) {
  ncclUniqueId id;
  TRITIUM_CHECK(id_hex.size() == 2 * sizeof(id.internal), "tensor parallel: NCCL id of {} hex digits, expected {}",
                id_hex.size(), 2 * sizeof(id.internal));
  for (size_t i = 0; i < sizeof(id.internal); ++i)
    id.internal[i] = static_cast<char>(std::stoi(id_hex.substr(2 * i, 2), nullptr, 16));
  cuda::check(cudaSetDevice(device), "cudaSetDevice");
  ncclComm_t c = nullptr;
  check_nccl(api().CommInitRank(&c, world, id, rank), "ncclCommInitRank");
  comm_ = c;
  cudaStream_t s = nullptr;
  cuda::check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
  stream_ = s;
}

NcclComm::~NcclComm() {
  cudaSetDevice(device_);
  if (staging_) cudaFree(staging_);
  if (stream_) cudaStreamDestroy(static_cast<cudaStream_t>(stream_));
  // Shutdown only: abort is local (destroy may wait on peers that have already exited).
  if (comm_) {
    if (api().CommAbort) api().CommAbort(static_cast<ncclComm_t>(comm_));
    else api().CommDestroy(static_cast<ncclComm_t>(comm_));
  }
}

void NcclComm::all_reduce_sum(float* data, size_t n, void* stream) {
  TRITIUM_CHECK(comm_, "tensor parallel: the NCCL group was aborted");
  check_nccl(api().AllReduce(data, data, n, ncclFloat32, ncclSum, static_cast<ncclComm_t>(comm_),
                             static_cast<cudaStream_t>(stream)),
             "ncclAllReduce");
}

void NcclComm::all_gather(const void* send, size_t bytes, void* recv, void* stream) {
  TRITIUM_CHECK(comm_, "tensor parallel: the NCCL group was aborted");
  check_nccl(api().AllGather(send, recv, bytes, ncclUint8, static_cast<ncclComm_t>(comm_),
                             static_cast<cudaStream_t>(stream)),
             "ncclAllGather");
}

// Polls the stream rather than blocking in cudaStreamSynchronize: a peer that died or hangs would block it
// forever. Spins for the first ~200 us (a healthy step's collectives are done by then), then sleeps 20 us per poll.
void NcclComm::wait(void* stream, const char* what, double timeout_s) {
  auto s = static_cast<cudaStream_t>(stream);
  auto c = static_cast<ncclComm_t>(comm_);
  const auto start = std::chrono::steady_clock::now();
  for (int polls = 0;; ++polls) {
    const cudaError_t q = cudaStreamQuery(s);
    if (q == cudaSuccess) return;
    if (q != cudaErrorNotReady) cuda::check(q, what);
    if (polls < 2000) continue;
    ncclResult_t async = ncclSuccess;
    if (api().CommGetAsyncError(c, &async) == ncclSuccess && async != ncclSuccess && async != ncclInProgress) {
      if (api().CommAbort) api().CommAbort(c);
      comm_ = nullptr;
      fail("tensor parallel: rank {}: NCCL error during {}: {}; the group is aborted", rank_, what,
           api().GetErrorString(async));
    }
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (timeout_s > 0 && waited > timeout_s) {
      if (api().CommAbort) api().CommAbort(c);
      comm_ = nullptr;
      fail("tensor parallel: rank {}: {} did not complete within {:g} s (TRITIUM_TP_TIMEOUT): a rank died or hangs; "
           "the group is aborted",
           rank_, what, timeout_s);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

void NcclComm::broadcast_host(int32_t* data, size_t n, int root) {
  TRITIUM_CHECK(comm_, "tensor parallel: the NCCL group was aborted");
  cuda::check(cudaSetDevice(device_), "cudaSetDevice");
  auto s = static_cast<cudaStream_t>(stream_);
  if (n > staging_cap_) {
    if (staging_) cudaFree(staging_);
    staging_cap_ = std::max(n, staging_cap_ * 2);
    cuda::check(cudaMalloc(&staging_, staging_cap_ * sizeof(int32_t)), "cudaMalloc (broadcast staging)");
  }
  if (rank_ == root)
    cuda::check(cudaMemcpyAsync(staging_, data, n * sizeof(int32_t), cudaMemcpyHostToDevice, s), "cudaMemcpyAsync");
  check_nccl(api().Broadcast(staging_, staging_, n, ncclInt32, root, static_cast<ncclComm_t>(comm_), s),
             "ncclBroadcast");
  if (rank_ != root)
    cuda::check(cudaMemcpyAsync(data, staging_, n * sizeof(int32_t), cudaMemcpyDeviceToHost, s), "cudaMemcpyAsync");
  // The root bounds its wait; the other ranks wait for the root's next message as long as it takes (an idle
  // server), still stopping on an NCCL error.
  wait(s, "ncclBroadcast", rank_ == root ? env::tp_timeout_seconds() : 0);
}

}  // namespace tritium

#else  // no CUDA or no nccl.h at build time

namespace tritium {

namespace {
[[noreturn]] void no_nccl() {
  fail("tensor parallel over GPUs needs a build with CUDA and NCCL (nccl.h was not found at configure time)");
}
}  // namespace

std::string NcclComm::new_unique_id_hex() { no_nccl(); }
NcclComm::NcclComm(const std::string&, int, int, int) { no_nccl(); }
NcclComm::~NcclComm() = default;
void NcclComm::all_reduce_sum(float*, size_t, void*) { no_nccl(); }
void NcclComm::all_gather(const void*, size_t, void*, void*) { no_nccl(); }
void NcclComm::broadcast_host(int32_t*, size_t, int) { no_nccl(); }
void NcclComm::wait(void*, const char*, double) { no_nccl(); }

}  // namespace tritium
#endif
