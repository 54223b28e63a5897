// tritium kernels/cuda: what the two GQA decode attention kernels share (attention_decode.cu: CUDA cores, any
// pool type; attention_decode_tc.cu: tensor cores, bf16 pools): the cut of a context into chunks, and the launcher
// of the tensor-core kernel.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/kernels.h"

namespace tritium::cuda {

/// Positions per chunk of a context of n positions: at most kAttentionMaxSplit chunks, each a multiple of 32 (short
/// contexts are cut into 32-position chunks, so that one row still spreads over several blocks).
__host__ __device__ __forceinline__ int gqa_chunk(int n) {
  const int per = (n + kAttentionMaxSplit - 1) / kAttentionMaxSplit;
  const int c = (per + 31) / 32 * 32;
  return c > 32 ? c : 32;
}

/// The tensor-core kernel's share of a row per block: `chunks` consecutive chunks, attended one after another by one
/// warp (warps 1) or at once by one warp each (warps == chunks, 2..kGqaTcMaxWarps).
struct GqaTcSplit {
  int chunks;
  int warps;
};
constexpr int kGqaTcMaxWarps = 4;

/// The rule when the caller passes 0 for both: rows of 2..kGqaTcMaxWarps chunks in one block, a warp per chunk,
/// while rows x KVH is at most the SM count (a few rows); else one warp per block, a row of at most two chunks in one
/// block, more chunks per block (powers of two, the last step up to all nsplit) while rows x KVH x blocks per row
/// keeps 2 warps per SM.
GqaTcSplit attention_gqa_tc_split(int rows, int KVH, int nsplit);

/// The tensor-core GQA decode attention over bf16 pools (attention_decode_tc.cu), with the arguments of
/// attention_decode_gqa (fused) / attention_gqa (unfused) after their checks; cpb and warps as there (0: the rule).
void attention_gqa_tc(bool fused, const float* qkv, int64_t ldq, int rows, int H, int KVH, int D, const float* cos_t,
                      const float* sin_t, const int32_t* pos, const int32_t* seq, const int32_t* block_tables,
                      int bt_width, int block_size, __nv_bfloat16* k_pool, __nv_bfloat16* v_pool, float* out,
                      int nsplit, const int32_t* row_list, float* part, int32_t* cnt, cudaStream_t stream, int cpb,
                      int warps, const PendingSums& sums);

}  // namespace tritium::cuda
