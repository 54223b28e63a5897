// tritium kernels/cuda: the launcher of the pipelined ternary (tc2) x int8 GEMM of ternary_gemm.cu, for the
// dispatch in ternary.cu. Device-side internals only; the public entry point is ternary_matmul (kernels.h).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/ternary_epilogue.cuh"

namespace tritium::cuda {

/// y[m, row] = epilogue(sum_k w[row, k] x[m, k]) for tc2 weights w [np, kp / 16] words (np a multiple of 64,
/// kp of 64), int8 activations xq [M, kp] (zero past k), their row sums sumq [M] and multipliers inv_s [M].
/// Blocks of 8 warps take 128 weight rows x 64 tokens; K runs in stages of 128 through a 6-deep cp.async pipeline,
/// split over `split` blocks of a cluster (0 = tiled_gemm_split_for) whose partial sums meet in distributed shared
/// memory. pdl: launched with programmatic dependent launch (the weights of the first stages are requested before
/// the wait). Exact int32 sums, the epilogue of store_result. Needs sm_90 (clusters).
void launch_tc2_tiled_gemm(const uint32_t* w, int n, int np, int kp, const int8_t* xq, const int32_t* sumq,
                           const float* inv_s, int M, const Epi& ep, cudaStream_t st, int split, bool pdl);

}  // namespace tritium::cuda
