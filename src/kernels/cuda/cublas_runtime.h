// tritium kernels/cuda: cuBLAS and cuBLASLt are loaded when the GPU first uses them, not when the program starts.
//
// Linked at build time, libcublasLt alone makes ~200 MB of a CPU-only run resident (its relocations and static data
// are touched at start-up), a third of a 1.7B ternary model's footprint on the CPU. The build therefore links
// neither: cublas_runtime.cpp defines the cuBLAS / cuBLASLt entry points tritium calls (their declarations come
// from cublas_v2.h and cublasLt.h, so the compiler checks every signature), and each one resolves the library's
// own symbol with dlopen/dlsym on its first call (libcublas.so.<CUBLAS_VER_MAJOR>, libcublasLt.so.<...>, found
// through the binary's RUNPATH or LD_LIBRARY_PATH). A missing library is a tritium::Error naming it.
#pragma once

#include <string>
#include <vector>

namespace tritium::cuda {

/// Loads both libraries and resolves every entry point tritium uses without calling any (no GPU needed).
/// Returns the names that did not resolve (empty when all did). Throws tritium::Error when a library cannot be
/// loaded.
std::vector<std::string> cublas_unresolved_entry_points();

}  // namespace tritium::cuda
