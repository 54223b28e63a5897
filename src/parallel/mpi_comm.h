// tritium parallel: MPI for multi-node tensor parallelism — the bootstrap (who is rank r, the NCCL unique id from
// rank 0 to everyone) and host collectives over MPI_COMM_WORLD.
//
// `mpirun -np N tritium serve -m DIR --device cuda --tensor-parallel N` (N processes, one per GPU, on one or more
// hosts): every process loads the model; start_tensor_parallel (executor/tp_launch.h) sees the MPI launcher in the
// environment, takes rank and world from MPI instead of forking, lets rank 0 create the ncclUniqueId and
// broadcasts it with MPI_Bcast; each process uses GPU (first device + its local rank on its host). From then on
// NCCL carries all traffic, exactly as in the single-host fork path.
//
// Built only when CMake finds MPI (Debian: libopenmpi-dev; option TRITIUM_MPI); otherwise mpi_available() is
// false and the functions below throw tritium::Error.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "parallel/communicator.h"

namespace tritium {

/// True when this build links MPI.
bool mpi_available();

/// True when the process was started by an MPI launcher: OMPI_COMM_WORLD_SIZE (Open MPI), PMI_SIZE (MPICH/Hydra,
/// Slurm PMI-1/2) or PMIX_RANK (PMIx) in the environment. Does not initialize MPI.
bool launched_by_mpi();

struct MpiWorld {
  int rank = 0;
  int size = 1;
  int local_rank = 0;  ///< rank among the processes of this host (MPI_COMM_TYPE_SHARED split)
};

/// Initializes MPI once per process (MPI_THREAD_SERIALIZED: collectives are called from one thread at a time)
/// and registers MPI_Finalize at exit; later calls return the same values. Throws tritium::Error without MPI.
MpiWorld mpi_init();

/// Finalizes MPI now (a worker process before _Exit); no-op when MPI is not initialized or already finalized.
void mpi_finalize();

/// Root's string to every rank (length, then bytes). Collective: every rank must call it.
void mpi_broadcast_string(std::string& s, int root);

/// MPI_COMM_WORLD as a host Communicator. all_reduce_sum gathers every rank's buffer and sums in rank order, so
/// all ranks get the same bits as make_local_group's reduction (MPI_Allreduce leaves the order to the library).
/// Calls mpi_init(). Throws tritium::Error without MPI.
std::shared_ptr<Communicator> make_mpi_communicator();

}  // namespace tritium
