// tritium kernels/cuda: pieces shared by the GQA decode attention kernels (attention_decode.cu: CUDA cores, every
// pool element; attention_decode_mma.cu: bf16 pools on the tensor cores): the chunking of a context, cp.async
// copies, and the tensor-core kernel's launcher.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/kernels.h"

namespace tritium::cuda {

// Positions per chunk of a context of n positions: at most kAttentionMaxSplit chunks, each a multiple of 32 (short
// contexts are cut into 32-position chunks, so that one row still spreads over several blocks).
__host__ __device__ __forceinline__ int gqa_chunk(int n) {
  const int per = (n + kAttentionMaxSplit - 1) / kAttentionMaxSplit;
  const int c = (per + 31) / 32 * 32;
  return c > 32 ? c : 32;
}

__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(gmem) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
/// Waits until at most N of this thread's commit groups are in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

/// Warps per block of the tensor-core kernel: each attends 16 positions of a 16 x kGqaMmaWarps-position tile.
inline constexpr int kGqaMmaWarps = 2;

/// The bf16-pool GQA decode attention on the tensor cores (attention_decode_mma.cu), with the arguments and the
/// chunking of attention_decode_gqa (FUSED) / attention_gqa; cpb >= 1. Grid (rows, KVH, ceil(nsplit / cpb)).
template <bool FUSED>
void launch_gqa_mma(const float* qkv, int64_t ldq, int rows, int H, int KVH, int D, const float* cos_t,
                    const float* sin_t, const int32_t* pos, const int32_t* seq, const int32_t* block_tables,
                    int bt_width, int block_size, void* k_pool, void* v_pool, float* out, int nsplit,
                    const int32_t* row_list, float* part, int32_t* cnt, cudaStream_t stream, int cpb);

}  // namespace tritium::cuda
