// tritium kernels/cuda: ternary (tc2) x int8 GEMV (dp4a) and GEMM (int8 tensor-core MMA), and the BITCOS-layout
// GEMV (dp4a), int32 accumulation.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/kernels.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/tc2_ops.cuh"
#include "kernels/cuda/ternary_epilogue.cuh"
#include "kernels/cuda/ternary_gemm.cuh"

namespace tritium::cuda {
namespace {

// dp4a GEMV: a warp holds 32 / LPR weight rows, LPR lanes per row each taking 16-byte pieces (64 weights)
// c = sub, sub + LPR, ...; WARPS warps per block. The activations of the M tokens are staged in shared memory as
// [m][q][chunk] uint4 (q = which 16 bytes of the chunk's 64) so that the LPR lanes of a row read consecutive
// 16-byte words (no bank conflicts). U pieces per lane are loaded before the first use and before waiting for
// the previous kernel (weights written on the stream are launched without PDL, see run()). The four code groups
// of a word are only masked, not shifted (word & (0x03030303 << 2g) = 4^g * codes), and summed into four
// accumulators per token, combined at the end as a0 + a1 / 4 + a2 / 16 + a3 / 64 (exact: each a_g is a multiple
// of 4^g): 4 logic operations per word, not 7.
template <int M, int LPR, int U, int WARPS>
__global__ void __launch_bounds__(WARPS * 32) tc2_gemv_kernel(const uint4* __restrict__ w, int n, int nch,
                                                              const int8_t* __restrict__ xq,
                                                              const int32_t* __restrict__ sumq,
                                                              const float* __restrict__ inv_s, Epi ep) {
  extern __shared__ uint4 xs[];
  constexpr int RPW = 32 / LPR;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int row = (blockIdx.x * WARPS + warp) * RPW + lane / LPR;
  const int sub = lane % LPR;
  const uint4* wr = w + static_cast<int64_t>(row) * nch;

  // First weight loads in flight before the activations are staged.
  uint4 wv[U];
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int c = sub + u * LPR;
    wv[u] = c < nch ? __ldg(wr + c) : make_uint4(0, 0, 0, 0);
  }
  pdl_trigger();
  pdl_wait();
  const uint4* xg = reinterpret_cast<const uint4*>(xq);
  for (int i = threadIdx.x; i < M * nch * 4; i += WARPS * 32) {
    const int m = i / (nch * 4), rem = i % (nch * 4);
    xs[(m * 4 + (rem & 3)) * nch + (rem >> 2)] = xg[i];
  }
  __syncthreads();

  int acc[M][4];
#pragma unroll
  for (int m = 0; m < M; ++m) acc[m][0] = acc[m][1] = acc[m][2] = acc[m][3] = 0;

  for (int c0 = sub; c0 < nch; c0 += LPR * U) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int c = c0 + u * LPR;
      if (c >= nch) break;  // later pieces are out of range too (no work for the unused slots of U)
      const uint32_t words[4] = {wv[u].x, wv[u].y, wv[u].z, wv[u].w};
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        uint32_t cw[4];
#pragma unroll
        for (int g = 0; g < 4; ++g) cw[g] = words[q] & (kTc2Mask << (2 * g));
#pragma unroll
        for (int m = 0; m < M; ++m) {
          const uint4 xv = xs[(m * 4 + q) * nch + c];
          acc[m][0] = dp4a_us(cw[0], static_cast<int>(xv.x), acc[m][0]);
          acc[m][1] = dp4a_us(cw[1], static_cast<int>(xv.y), acc[m][1]);
          acc[m][2] = dp4a_us(cw[2], static_cast<int>(xv.z), acc[m][2]);
          acc[m][3] = dp4a_us(cw[3], static_cast<int>(xv.w), acc[m][3]);
        }
      }
    }
    // Next pieces.
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int c = c0 + LPR * U + u * LPR;
      wv[u] = c < nch ? __ldg(wr + c) : make_uint4(0, 0, 0, 0);
    }
  }
  int sum[M];
#pragma unroll
  for (int m = 0; m < M; ++m) {
    sum[m] = acc[m][0] + (acc[m][1] >> 2) + (acc[m][2] >> 4) + (acc[m][3] >> 6);
#pragma unroll
    for (int off = LPR / 2; off > 0; off /= 2) sum[m] += __shfl_xor_sync(0xffffffffu, sum[m], off);
  }
  if (row < n) {
#pragma unroll
    for (int m = 0; m < M; ++m)
      if (m % LPR == sub) store_result(ep, n, m, row, sum[m] - sumq[m], ep.acc_out ? 0.f : inv_s[m]);
  }
}

__device__ __forceinline__ void mma_us8(int (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                        uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// GEMV on the int8 tensor cores (M <= 16 tokens in NT = ceil(M / 8) N-tiles of 8 columns of m16n8k32). A block
// takes 16 weight rows; its WARPS warps split the rows' 16-byte chunks in steps of four (warp w: steps w,
// w + WARPS, ...). In a step, lane (g = lane / 4, t = lane % 4) loads chunk 4 s + t of rows g and g + 8 (16 bytes
// each) and the 64 activations of tokens g and g + 8 (where < M) at that chunk. The k order inside an MMA is free
// as long as A and B agree: A's k-slots 4t..4t+3 (row g) are code group j of word 2h of lane t's chunk, slots
// 16 + 4t.. group j of word 2h + 1, and B's slots hold the matching activations. Groups are masked, not shifted
// (u8 codes c * 4^j), one accumulator set per group, combined as a0 + a1 / 4 + a2 / 16 + a3 / 64: one logic
// operation per 4 weights and one MMA per 512 weights and N-tile. The warps' partial sums meet in shared memory.
template <int M, int U, int WARPS>
__global__ void __launch_bounds__(WARPS * 32) tc2_gemv_mma_kernel(const uint4* __restrict__ w, int n, int nch,
                                                                  const int8_t* __restrict__ xq,
                                                                  const int32_t* __restrict__ sumq,
                                                                  const float* __restrict__ inv_s, Epi ep) {
  constexpr int NT = (M + 7) / 8;
  extern __shared__ uint4 xs[];  // [M][nch * 4] activations as they are, then [WARPS][16][8 NT] partial sums
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;
  const int r0 = blockIdx.x * 16, steps = (nch + 3) / 4;
  const uint4* wa = w + static_cast<int64_t>(r0 + g) * nch + t;
  const uint4* wb = wa + static_cast<int64_t>(8) * nch;
  uint4 va[U], vb[U];
  auto load = [&](int u, int s) {
    const int c = 4 * s;
    const bool ok = s < steps && c + t < nch;
    va[u] = ok ? __ldg(wa + c) : make_uint4(0, 0, 0, 0);
    vb[u] = ok ? __ldg(wb + c) : make_uint4(0, 0, 0, 0);
  };
#pragma unroll
  for (int u = 0; u < U; ++u) load(u, warp + u * WARPS);
  pdl_trigger();
  pdl_wait();
  const uint4* xg = reinterpret_cast<const uint4*>(xq);
  for (int i = threadIdx.x; i < M * nch * 4; i += WARPS * 32) xs[i] = xg[i];
  __syncthreads();

  int acc[NT][4][4];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int j = 0; j < 4; ++j) acc[nt][j][0] = acc[nt][j][1] = acc[nt][j][2] = acc[nt][j][3] = 0;
  for (int s0 = warp; s0 < steps; s0 += U * WARPS) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int s = s0 + u * WARPS;
      if (s >= steps) break;
      const int c = 4 * s + t;
      uint4 xv[NT][4];
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        const int m = nt * 8 + g;
#pragma unroll
        for (int i = 0; i < 4; ++i)
          xv[nt][i] = (m < M && c < nch) ? xs[(m * nch + c) * 4 + i] : make_uint4(0, 0, 0, 0);
      }
      const uint32_t a[4] = {va[u].x, va[u].y, va[u].z, va[u].w}, b[4] = {vb[u].x, vb[u].y, vb[u].z, vb[u].w};
#pragma unroll
      for (int h = 0; h < 2; ++h) {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const uint32_t mk = kTc2Mask << (2 * j);
          const uint32_t a0 = a[2 * h] & mk, a1 = b[2 * h] & mk, a2 = a[2 * h + 1] & mk, a3 = b[2 * h + 1] & mk;
#pragma unroll
          for (int nt = 0; nt < NT; ++nt) {
            const uint32_t x0[4] = {xv[nt][2 * h].x, xv[nt][2 * h].y, xv[nt][2 * h].z, xv[nt][2 * h].w};
            const uint32_t x1[4] = {xv[nt][2 * h + 1].x, xv[nt][2 * h + 1].y, xv[nt][2 * h + 1].z,
                                    xv[nt][2 * h + 1].w};
            mma_us8(acc[nt][j], a0, a1, a2, a3, x0[j], x1[j]);
          }
        }
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) load(u, s0 + (U + u) * WARPS);
  }
  __syncthreads();  // the activations are no longer read: the partial sums go where they were
  int* part = reinterpret_cast<int*>(xs);
  constexpr int NC = 8 * NT;  // columns (tokens) of the tile
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int v = acc[nt][0][e] + (acc[nt][1][e] >> 2) + (acc[nt][2][e] >> 4) + (acc[nt][3][e] >> 6);
      const int rr = g + (e >= 2 ? 8 : 0), m = nt * 8 + 2 * t + (e & 1);
      part[(warp * 16 + rr) * NC + m] = v;
    }
  __syncthreads();
  for (int i = threadIdx.x; i < 16 * NC; i += WARPS * 32) {
    const int rr = i / NC, m = i % NC, row = r0 + rr;
    if (m >= M || row >= n) continue;
    int v = 0;
#pragma unroll
    for (int q = 0; q < WARPS; ++q) v += part[q * 16 * NC + i];
    store_result(ep, n, m, row, v - sumq[m], ep.acc_out ? 0.f : inv_s[m]);
  }
}

// GEMM: block tile 64 tokens x 64 weight rows, k-chunks of 64 (one uint4 of codes per row). The codes of a chunk
// go to shared memory as they are; each thread builds its m16n8k32 B fragments with a shift and a mask
// (group t of words 2s and 2s + 1). 4 warps, warp w owns tokens 16w..16w+15 and all 64 rows (8 n-tiles).
// Next chunk prefetched into registers while the current one is multiplied.
__global__ void __launch_bounds__(128) tc2_gemm_kernel(const uint4* __restrict__ w, int n, int nch,
                                                       const int8_t* __restrict__ xq, int M,
                                                       const int32_t* __restrict__ sumq,
                                                       const float* __restrict__ inv_s, Epi ep) {
  __shared__ __align__(16) int8_t As[64][80];
  __shared__ uint4 Bs[64];
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane >> 2, t = lane & 3;
  const int m0 = blockIdx.y * 64, n0 = blockIdx.x * 64;
  pdl_trigger();
  pdl_wait();
  const int64_t kp = static_cast<int64_t>(nch) * 64;
  uint4 ra[2], rb = make_uint4(0, 0, 0, 0);
  auto load = [&](int c) {
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int idx = tid + i * 128, r = idx / 4, part = idx % 4;
      const int m = m0 + r;
      ra[i] = m < M ? *reinterpret_cast<const uint4*>(xq + m * kp + c * 64 + part * 16) : make_uint4(0, 0, 0, 0);
    }
    if (tid < 64) rb = __ldg(w + static_cast<int64_t>(n0 + tid) * nch + c);
  };
  int acc[8][4];
#pragma unroll
  for (int j = 0; j < 8; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0;
  load(0);
  for (int c = 0; c < nch; ++c) {
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int idx = tid + i * 128;
      *reinterpret_cast<uint4*>(&As[idx / 4][(idx % 4) * 16]) = ra[i];
    }
    if (tid < 64) Bs[tid] = rb;
    __syncthreads();
    if (c + 1 < nch) load(c + 1);
    const int ar = warp * 16 + g;
#pragma unroll
    for (int s = 0; s < 2; ++s) {
      const uint32_t a0 = *reinterpret_cast<const uint32_t*>(&As[ar][s * 32 + t * 4]);
      const uint32_t a1 = *reinterpret_cast<const uint32_t*>(&As[ar + 8][s * 32 + t * 4]);
      const uint32_t a2 = *reinterpret_cast<const uint32_t*>(&As[ar][s * 32 + 16 + t * 4]);
      const uint32_t a3 = *reinterpret_cast<const uint32_t*>(&As[ar + 8][s * 32 + 16 + t * 4]);
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const uint4 bw = Bs[j * 8 + g];
        const uint32_t w0 = s == 0 ? bw.x : bw.z, w1 = s == 0 ? bw.y : bw.w;
        mma_s8(acc[j], a0, a1, a2, a3, (w0 >> (2 * t)) & kTc2Mask, (w1 >> (2 * t)) & kTc2Mask);
      }
    }
    __syncthreads();
  }
#pragma unroll
  for (int j = 0; j < 8; ++j) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int m = m0 + warp * 16 + g + (e >= 2 ? 8 : 0);
      const int row = n0 + j * 8 + 2 * t + (e & 1);
      if (m < M && row < n) store_result(ep, n, m, row, acc[j][e] - sumq[m], ep.acc_out ? 0.f : inv_s[m]);
    }
  }
}

// dp4a GEMV launch: 4 warps per block with 8 or 16 lanes per row, 8 warps (one row each) with 32.
template <int M, int LPR, int U>
void launch_gemv(const uint32_t* w, int n, int np, int kp, const int8_t* xq, const int32_t* sumq, const float* inv_s,
                 const Epi& ep, cudaStream_t st, bool pdl) {
  constexpr int WARPS = LPR == 32 ? 8 : 4;
  const int nch = kp / 64;
  const size_t smem = static_cast<size_t>(M) * kp;
  auto kern = tc2_gemv_kernel<M, LPR, U, WARPS>;
  static int smem_set = 48 * 1024;  // the opt-in limit set so far for this instantiation (set before capture)
  if (static_cast<int>(smem) > smem_set) {
    check(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)),
          "ternary GEMV smem attribute");
    smem_set = static_cast<int>(smem);
  }
  const int rows_per_block = WARPS * (32 / LPR);
  launch_pdl(pdl, kern, dim3(np / rows_per_block), dim3(WARPS * 32), smem, st, "ternary GEMV",
             reinterpret_cast<const uint4*>(w), n, nch, xq, sumq, inv_s, ep);
}

// dp4a GEMV: U = 4 pieces per lane in flight up to 4 tokens, 2 above.
template <int M, int LPR>
void gemv_u(const uint32_t* w, int n, int np, int kp, const int8_t* xq, const int32_t* sumq, const float* inv_s,
            const Epi& ep, cudaStream_t st, bool pdl) {
  launch_gemv<M, LPR, (M <= 4 ? 4 : 2)>(w, n, np, kp, xq, sumq, inv_s, ep, st, pdl);
}

// MMA GEMV launch: one block of WARPS warps per 16 rows, U steps of four chunks per warp in flight.
template <int M, int U, int WARPS>
void launch_gemv_mma(const uint32_t* w, int n, int np, int kp, const int8_t* xq, const int32_t* sumq,
                     const float* inv_s, const Epi& ep, cudaStream_t st, bool pdl) {
  constexpr int NT = (M + 7) / 8;
  const size_t smem = std::max<size_t>(static_cast<size_t>(M) * kp, WARPS * 16 * 8 * NT * sizeof(int));
  auto kern = tc2_gemv_mma_kernel<M, U, WARPS>;
  static int smem_set = 48 * 1024;
  if (static_cast<int>(smem) > smem_set) {
    check(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)),
          "ternary MMA GEMV smem attribute");
    smem_set = static_cast<int>(smem);
  }
  launch_pdl(pdl, kern, dim3(np / 16), dim3(WARPS * 32), smem, st, "ternary MMA GEMV",
             reinterpret_cast<const uint4*>(w), n, kp / 64, xq, sumq, inv_s, ep);
}

// The GEMVs at M tokens: the MMA GEMV with lanes_or_warps warps per 16-row block, or the dp4a GEMV with
// lanes_or_warps lanes per weight row (both validated by run()).
template <int M>
void gemv(TernaryKernel kernel, int lanes_or_warps, const uint32_t* w, int n, int np, int kp, const int8_t* xq,
          const int32_t* sumq, const float* inv_s, const Epi& ep, cudaStream_t st, bool pdl) {
  if (kernel == TernaryKernel::kMmaGemv) {
    if (lanes_or_warps == 8) launch_gemv_mma<M, 2, 8>(w, n, np, kp, xq, sumq, inv_s, ep, st, pdl);
    else launch_gemv_mma<M, 3, 4>(w, n, np, kp, xq, sumq, inv_s, ep, st, pdl);
  } else if (lanes_or_warps == 8) {
    gemv_u<M, 8>(w, n, np, kp, xq, sumq, inv_s, ep, st, pdl);
  } else if (lanes_or_warps == 16) {
    gemv_u<M, 16>(w, n, np, kp, xq, sumq, inv_s, ep, st, pdl);
  } else {
    gemv_u<M, 32>(w, n, np, kp, xq, sumq, inv_s, ep, st, pdl);
  }
}

// pdl false: launched without programmatic dependent launch (the weights were written by the previous kernel, and
// the GEMVs load them before their pdl_wait()).
void run(const uint32_t* w, int n, int np, int kp, const int8_t* xq, const int32_t* sumq, const float* inv_s, int M,
         const Epi& ep, cudaStream_t st, TernaryKernel kernel, int lanes_or_warps, bool pdl) {
  if (n <= 0 || np % 64 || np < n || kp <= 0 || kp % 64 || M <= 0) {
    check(cudaErrorInvalidValue, "ternary_matmul (bad shape)");
  }
  // The automatic choice, measured on the H200 (bench/CUDA_NOTES.md, "Ternary GEMV and GEMM kernels"): the dp4a
  // GEMV at one token, the MMA GEMV from 2 to 16 tokens (1.3-3x faster than the dp4a GEMV and the GEMM there), the
  // MMA GEMM above.
  if (kernel == TernaryKernel::kAuto) {
    kernel = M == 1    ? TernaryKernel::kDp4aGemv
             : M <= 16 ? TernaryKernel::kMmaGemv
                       : (tiled_gemm_supported() ? TernaryKernel::kTiledGemm : TernaryKernel::kMmaGemm);
  }
  if (kernel != TernaryKernel::kDp4aGemv && kernel != TernaryKernel::kMmaGemm && kernel != TernaryKernel::kMmaGemv &&
      kernel != TernaryKernel::kTiledGemm)
    check(cudaErrorInvalidValue, "ternary_matmul (kernel)");
  if ((kernel == TernaryKernel::kDp4aGemv || kernel == TernaryKernel::kMmaGemv) && M > 16)
    check(cudaErrorInvalidValue, "ternary_matmul (GEMV takes at most 16 tokens)");
  if (kernel == TernaryKernel::kTiledGemm) {
    launch_tc2_tiled_gemm(w, n, np, kp, xq, sumq, inv_s, M, ep, st, lanes_or_warps, pdl);
    return;
  }
  if (kernel == TernaryKernel::kMmaGemm) {
    dim3 grid(np / 64, (M + 63) / 64);
    launch_pdl(pdl, tc2_gemm_kernel, grid, dim3(128), 0, st, "ternary GEMM", reinterpret_cast<const uint4*>(w), n,
               kp / 64, xq, M, sumq, inv_s, ep);
    return;
  }
  if (kernel == TernaryKernel::kMmaGemv) {
    // Warps per 16-row tile: 8 below 8192 rows (fewer tiles, so more warps share a tile's row chunks), else 4.
    if (lanes_or_warps == 0) lanes_or_warps = np < 8192 ? 8 : 4;
    if (lanes_or_warps != 4 && lanes_or_warps != 8)
      check(cudaErrorInvalidValue, "ternary_matmul (MMA GEMV: 4 or 8 warps)");
  } else {
    // Lanes per row: 8 (16 rows per block) when that gives about two blocks per SM; else 32 (one warp per row,
    // 8 per block: more bytes in flight) on long rows, 16 (8 rows per block) on short ones.
    if (lanes_or_warps == 0) lanes_or_warps = np / 16 >= 264 ? 8 : (kp >= 4096 ? 32 : 16);
    if (lanes_or_warps != 8 && lanes_or_warps != 16 && lanes_or_warps != 32)
      check(cudaErrorInvalidValue, "ternary_matmul (dp4a GEMV: 8, 16 or 32 lanes per row)");
  }
  switch (M) {
#define TRITIUM_GEMV_CASE(MM) \
  case MM: gemv<MM>(kernel, lanes_or_warps, w, n, np, kp, xq, sumq, inv_s, ep, st, pdl); break;
    TRITIUM_GEMV_CASE(1) TRITIUM_GEMV_CASE(2) TRITIUM_GEMV_CASE(3) TRITIUM_GEMV_CASE(4)
    TRITIUM_GEMV_CASE(5) TRITIUM_GEMV_CASE(6) TRITIUM_GEMV_CASE(7) TRITIUM_GEMV_CASE(8)
    TRITIUM_GEMV_CASE(9) TRITIUM_GEMV_CASE(10) TRITIUM_GEMV_CASE(11) TRITIUM_GEMV_CASE(12)
    TRITIUM_GEMV_CASE(13) TRITIUM_GEMV_CASE(14) TRITIUM_GEMV_CASE(15) TRITIUM_GEMV_CASE(16)
#undef TRITIUM_GEMV_CASE
  }
}

// BITCOS GEMV (layout: ternary_bitcos_gpu.h): one warp per weight row, lane l takes groups l, l + 32, ... of 32
// weights. Per round of 32 groups the lanes load their presence masks (coalesced), a warp inclusive scan of
// __popc(mask) gives each lane the position of its first sign bit in the row's stream, and the lane reads a
// 32-bit window of signs there (two words, funnel shift). Each 4-weight nibble becomes one dp4a operand of
// int8 weights (+1 / -1 / 0) through a 256-word shared table indexed by (mask nibble, next 4 sign bits); the
// sign window then advances by __popc(nibble). The operands are the weights themselves, so the int32 sums are
// the exact dot products (no row-sum correction).
__device__ __forceinline__ uint32_t bitcos_expand(uint32_t m4, uint32_t s4) {
  uint32_t out = 0;
  int e = 0;
  for (int j = 0; j < 4; ++j) {
    if (!((m4 >> j) & 1u)) continue;
    out |= (((s4 >> e) & 1u) ? 0xFFu : 0x01u) << (8 * j);
    ++e;
  }
  return out;
}

// The sign window of a lane's group in one round: warp inclusive scan of __popc(mask) from the row's bit `base`
// (advanced past the round), then the two sign words holding bits p .. p + 31 (read only when the group has
// non-zeros: then p < the row's non-zeros, so both words lie in the row's stream or the trailing word).
__device__ __forceinline__ void bitcos_locate(uint32_t mask, const uint32_t* __restrict__ sr, int lane,
                                              uint32_t& base, uint32_t& w0, uint32_t& w1, uint32_t& p) {
  const int cnt = __popc(mask);
  int incl = cnt;
#pragma unroll
  for (int off = 1; off < 32; off *= 2) {
    const int v = __shfl_up_sync(0xffffffffu, incl, off);
    if (lane >= off) incl += v;
  }
  p = base + static_cast<uint32_t>(incl - cnt);
  base += static_cast<uint32_t>(__shfl_sync(0xffffffffu, incl, 31));
  if (cnt) {
    w0 = __ldg(sr + p / 32);
    w1 = __ldg(sr + p / 32 + 1);
  }
}

template <int M>
__global__ void __launch_bounds__(128) bitcos_gemv_kernel(const uint32_t* __restrict__ masks,
                                                          const uint32_t* __restrict__ row_offsets,
                                                          const uint32_t* __restrict__ signs, int n, int groups,
                                                          const int8_t* __restrict__ xq, int kp,
                                                          const float* __restrict__ inv_s, Epi ep) {
  __shared__ uint32_t tab[256];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int row = blockIdx.x * 4 + warp;
  const int rr = row < n ? row : n - 1;  // rows past n compute row n - 1 and store nothing
  const uint32_t* mr = masks + static_cast<int64_t>(rr) * groups;
  const uint32_t* sr = signs + __ldg(row_offsets + rr);
  // Round r covers groups 32 r .. 32 r + 31. Software pipeline: the sign words of round r + 1 and the masks of
  // round r + 2 are in flight while round r is multiplied; round 0's weights are loaded before the wait.
  uint32_t base = 0;  // sign bits of the row located so far
  uint32_t cm = lane < groups ? __ldg(mr + lane) : 0u, cw0 = 0, cw1 = 0, cp = 0;
  bitcos_locate(cm, sr, lane, base, cw0, cw1, cp);
  uint32_t nm = lane + 32 < groups ? __ldg(mr + lane + 32) : 0u;
  for (int i = threadIdx.x; i < 256; i += blockDim.x) tab[i] = bitcos_expand(i >> 4, i & 15);
  pdl_trigger();
  pdl_wait();
  __syncthreads();

  int acc[M];
#pragma unroll
  for (int m = 0; m < M; ++m) acc[m] = 0;
  for (int g0 = 0; g0 < groups; g0 += 32) {
    const int g = g0 + lane;
    uint32_t nw0 = 0, nw1 = 0, np = 0;
    if (g0 + 32 < groups) bitcos_locate(nm, sr, lane, base, nw0, nw1, np);  // warp-uniform condition
    const uint32_t nnm = g + 64 < groups ? __ldg(mr + g + 64) : 0u;
    const uint32_t cur = cm;
    uint32_t s = __funnelshift_r(cw0, cw1, cp % 32);
    cm = nm, cw0 = nw0, cw1 = nw1, cp = np, nm = nnm;
    if (cur) {
      uint32_t code[8];
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const uint32_t m4 = (cur >> (4 * j)) & 15u;
        code[j] = tab[(m4 << 4) | (s & 15u)];
        s >>= __popc(m4);
      }
#pragma unroll
      for (int m = 0; m < M; ++m) {
        const uint4* xv = reinterpret_cast<const uint4*>(xq + static_cast<int64_t>(m) * kp + 32 * g);
        const uint4 a = __ldg(xv), b = __ldg(xv + 1);
        int t = acc[m];
        t = __dp4a(static_cast<int>(code[0]), static_cast<int>(a.x), t);
        t = __dp4a(static_cast<int>(code[1]), static_cast<int>(a.y), t);
        t = __dp4a(static_cast<int>(code[2]), static_cast<int>(a.z), t);
        t = __dp4a(static_cast<int>(code[3]), static_cast<int>(a.w), t);
        t = __dp4a(static_cast<int>(code[4]), static_cast<int>(b.x), t);
        t = __dp4a(static_cast<int>(code[5]), static_cast<int>(b.y), t);
        t = __dp4a(static_cast<int>(code[6]), static_cast<int>(b.z), t);
        t = __dp4a(static_cast<int>(code[7]), static_cast<int>(b.w), t);
        acc[m] = t;
      }
    }
  }
#pragma unroll
  for (int m = 0; m < M; ++m) {
#pragma unroll
    for (int off = 16; off > 0; off /= 2) acc[m] += __shfl_xor_sync(0xffffffffu, acc[m], off);
  }
  if (row < n) {
#pragma unroll
    for (int m = 0; m < M; ++m)
      if (m == lane) store_result(ep, n, m, row, acc[m], ep.acc_out ? 0.f : inv_s[m]);
  }
}

/// ternary_epilogue: 4 consecutive outputs of one row per thread (n, ldacc and ldy multiples of 4), or one
/// (vec4 0). The sums are loaded before the residual, so each thread's loads are in flight together.
/// parts > 1: the partial sums of a K-split GEMM, part_stride int32 apart, added in part order.
template <int kVec>
__global__ void epilogue_i32_kernel(const int32_t* __restrict__ acc, int64_t ldacc, int rows, int n,
                                    const float* __restrict__ inv_s, Epi ep, int parts, int64_t part_stride) {
  pdl_trigger();
  pdl_wait();
  const int per_row = n / kVec;
  const int64_t total = static_cast<int64_t>(rows) * per_row;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int m = static_cast<int>(i / per_row), c = static_cast<int>(i % per_row) * kVec;
    const float s = inv_s[m];
    float* y = ep.y + static_cast<int64_t>(m) * ep.ldy + c;
    if constexpr (kVec == 4) {
      const int32_t* a = acc + static_cast<int64_t>(m) * ldacc + c;
      int4 v = *reinterpret_cast<const int4*>(a);
      for (int p = 1; p < parts; ++p) {
        const int4 b = *reinterpret_cast<const int4*>(a + p * part_stride);
        v.x += b.x, v.y += b.y, v.z += b.z, v.w += b.w;
      }
      float4 o = make_float4(epilogue_value(ep, c, v.x, s), epilogue_value(ep, c + 1, v.y, s),
                             epilogue_value(ep, c + 2, v.z, s), epilogue_value(ep, c + 3, v.w, s));
      if (ep.add) {
        const float4 r = *reinterpret_cast<const float4*>(y);
        o = make_float4(__fadd_rn(r.x, o.x), __fadd_rn(r.y, o.y), __fadd_rn(r.z, o.z), __fadd_rn(r.w, o.w));
      }
      *reinterpret_cast<float4*>(y) = o;
    } else {
      const int32_t* a = acc + static_cast<int64_t>(m) * ldacc + c;
      int32_t t = a[0];
      for (int p = 1; p < parts; ++p) t += a[p * part_stride];
      const float v = epilogue_value(ep, c, t, s);
      *y = ep.add ? __fadd_rn(*y, v) : v;
    }
  }
}

void run_bitcos(const uint32_t* masks, const uint32_t* row_offsets, const uint32_t* signs, int n, int kp,
                const int8_t* xq, const float* inv_s, int M, const Epi& ep, cudaStream_t st) {
  if (n <= 0 || kp <= 0 || kp % 64 || M <= 0 || M > 8) {
    check(cudaErrorInvalidValue, "ternary_bitcos_gemv (bad shape: n > 0, kp a multiple of 64, 1 <= M <= 8)");
  }
  const dim3 grid((n + 3) / 4), block(128);
  switch (M) {
#define TRITIUM_BITCOS_CASE(MM)                                                                                    \
  case MM:                                                                                                         \
    launch(bitcos_gemv_kernel<MM>, grid, block, 0, st, "ternary BITCOS GEMV", masks, row_offsets, signs, n, kp / 32, \
           xq, kp, inv_s, ep);                                                                                     \
    break;
    TRITIUM_BITCOS_CASE(1) TRITIUM_BITCOS_CASE(2) TRITIUM_BITCOS_CASE(3) TRITIUM_BITCOS_CASE(4)
    TRITIUM_BITCOS_CASE(5) TRITIUM_BITCOS_CASE(6) TRITIUM_BITCOS_CASE(7) TRITIUM_BITCOS_CASE(8)
#undef TRITIUM_BITCOS_CASE
  }
}

}  // namespace

void ternary_matmul(const uint32_t* w, int n, int np, int kp, const int8_t* xq, const int32_t* sumq,
                    const float* inv_s, int M, const TernaryEpilogue& e, cudaStream_t stream, TernaryKernel kernel,
                    int lanes_or_warps, bool weights_from_stream) {
  const Epi ep = make_epi(e);
  run(w, n, np, kp, xq, sumq, inv_s, M, ep, stream, kernel, lanes_or_warps, !weights_from_stream);
}

void ternary_matmul_i32(const uint32_t* w, int n, int np, int kp, const int8_t* xq, const int32_t* sumq, int M,
                        int32_t* acc, cudaStream_t stream, TernaryKernel kernel, int lanes_or_warps,
                        bool weights_from_stream) {
  const Epi ep = make_epi_i32(acc);
  run(w, n, np, kp, xq, sumq, nullptr, M, ep, stream, kernel, lanes_or_warps, !weights_from_stream);
}

void ternary_epilogue(const int32_t* acc, int64_t ldacc, int rows, int n, const float* inv_s,
                      const TernaryEpilogue& e, cudaStream_t stream, int parts, int64_t part_stride) {
  if (rows <= 0 || n <= 0) return;
  if (!acc || !inv_s || !e.y || ldacc < n || e.ldy < n || parts < 1 ||
      (parts > 1 && part_stride < static_cast<int64_t>(rows) * ldacc))
    check(cudaErrorInvalidValue, "ternary_epilogue (bad arguments)");
  const Epi ep = make_epi(e);
  const bool vec = n % 4 == 0 && ldacc % 4 == 0 && e.ldy % 4 == 0 && part_stride % 4 == 0 &&
                   reinterpret_cast<uintptr_t>(acc) % 16 == 0 && reinterpret_cast<uintptr_t>(e.y) % 16 == 0;
  const int64_t items = static_cast<int64_t>(rows) * (vec ? n / 4 : n);
  const int threads = 256;
  const int blocks = static_cast<int>(std::min<int64_t>((items + threads - 1) / threads, 65535));
  if (vec) {
    launch(epilogue_i32_kernel<4>, dim3(blocks), dim3(threads), 0, stream, "ternary_epilogue", acc, ldacc, rows, n,
           inv_s, ep, parts, part_stride);
  } else {
    launch(epilogue_i32_kernel<1>, dim3(blocks), dim3(threads), 0, stream, "ternary_epilogue", acc, ldacc, rows, n,
           inv_s, ep, parts, part_stride);
  }
}

void ternary_bitcos_gemv(const uint32_t* masks, const uint32_t* row_offsets, const uint32_t* signs, int n, int kp,
                         const int8_t* xq, const float* inv_s, int M, const TernaryEpilogue& e, cudaStream_t stream) {
  const Epi ep = make_epi(e);
  run_bitcos(masks, row_offsets, signs, n, kp, xq, inv_s, M, ep, stream);
}

void ternary_bitcos_gemv_i32(const uint32_t* masks, const uint32_t* row_offsets, const uint32_t* signs, int n,
                             int kp, const int8_t* xq, int M, int32_t* acc, cudaStream_t stream) {
  const Epi ep = make_epi_i32(acc);
  run_bitcos(masks, row_offsets, signs, n, kp, xq, nullptr, M, ep, stream);
}

}  // namespace tritium::cuda
