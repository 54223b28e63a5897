// tritium core: every environment variable tritium reads, in one place (docs/environment.md describes each).
// Each accessor reads the variable when it is called (nothing is cached here); unset and empty read the same.
#pragma once

#include <string>

namespace tritium::env {

/// TRITIUM_KERNEL: forces the CPU kernel path, "ref", "avx2", "avx512" or "amx" ("" = the best this CPU supports).
std::string kernel();
/// TRITIUM_CUDA_ATTENTION: "basic" forces the simple per-row CUDA attention kernels; "" or "auto" = automatic.
std::string cuda_attention();
/// TRITIUM_CUDA_LAYOUT: the GPU layout of ternary weights, "tc2", "tcb" or "auto" ("" = the backend's option).
std::string cuda_layout();
/// TRITIUM_CUDA_GRAPHS: "0" turns off the capture of decode steps as CUDA graphs; true otherwise.
bool cuda_graphs();
/// TRITIUM_EVAL_DATA: the folder of the zero-shot task files `tritium eval` reads ("" = its default).
std::string eval_data();
/// TRITIUM_TP_RANK / TRITIUM_TP_WORLD / TRITIUM_TP_NCCL_ID: set by a tensor-parallel leader for the worker
/// processes it starts (executor/tp_launch.h), never by users. Rank and world are 0 when unset.
int tp_rank();
int tp_world();
std::string tp_nccl_id();
/// TRITIUM_TP_TIMEOUT: seconds a tensor-parallel collective waits for the other ranks before the group is aborted
/// (a worker died or hangs); default 300.
double tp_timeout_seconds();
/// Whether this process was started by an MPI launcher (OMPI_COMM_WORLD_SIZE, PMI_SIZE or PMIX_RANK set).
bool launched_by_mpi();

}  // namespace tritium::env
