// tritium executor: starting a tensor-parallel group of processes, one per GPU (vLLM / TensorRT-LLM style).
//
// The leader (rank 0, the process the user started) creates the ncclUniqueId and re-executes its own binary with
// the same command line for ranks 1..N-1 (fork + exec of /proc/self/exe), passing rank, world size and the id in
// the environment (TRITIUM_TP_RANK, TRITIUM_TP_WORLD, TRITIUM_TP_NCCL_ID); a worker's stdout goes to /dev/null,
// its stderr stays. Each rank loads the model, keeps its shard (parallel/shard.h), uploads it to GPU base + rank
// and joins the NCCL group. Rank 0 then runs the command as usual (scheduler, sampling, output): each forward
// first broadcasts the step's batch (token ids, positions, block tables, KV pool shape) over NCCL, then every
// rank runs the same forward. Workers exit when the leader's model is destroyed (a stop message) or the leader
// dies (PR_SET_PDEATHSIG). NCCL_NVLS_ENABLE=0, TORCH_SYMM_MEM_DISABLE_MULTICAST=1 and NVSHMEM_DISABLE_NVLS=1 are
// set in the environment when absent, so NVLink multicast stays off in every rank.
//
// Under mpirun (parallel/mpi_comm.h, builds with MPI) nothing is forked: every process runs the same command,
// rank / world / local rank come from MPI, rank 0's NCCL id is broadcast with MPI_Bcast, and each process uses GPU
// (first device + local rank) — one process per GPU on any number of hosts (docs/tensor_parallel.md).
#pragma once

#include <memory>

#include "model/transformer.h"
#include "backend/cuda/cuda_backend.h"

namespace tritium {

/// Whether this process was started as a tensor-parallel worker (TRITIUM_TP_RANK set and > 0).
bool is_tensor_parallel_worker();

/// Leader: spawns the workers, returns the backend of the group: it owns rank 0's shard (Backend::model()),
/// broadcasts each batch to the workers and runs rank 0's NCCL-connected CUDA backend (forward() returns full
/// logits). Worker: runs the worker loop and ends the process (never returns). `cuda.device` is the first
/// GPU; rank r uses cuda.device + r. Throws tritium::Error when world < 2, there are fewer GPUs than needed, the
/// model cannot be split that way (parallel/shard.h) or NCCL cannot be loaded.
std::shared_ptr<Backend> start_tensor_parallel(const Transformer& full, int world, const CudaOptions& cuda);

}  // namespace tritium
