// tritium kernels/cuda: ternary GEMV/GEMM over the tcb bit-plane layout (ternary_tcb.h) on the binary tensor
// cores (mma.sync m16n8k256 b1, AND + popcount), int32 accumulation; and the activations' bit planes.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/kernels.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/row_ops.cuh"
#include "kernels/cuda/tcb_mma.cuh"
#include "kernels/cuda/ternary_epilogue.cuh"

namespace tritium::cuda {
namespace {

// Loads through the non-coherent path as volatile asm: kept in program order with the other volatile asm, so
// every weight and activation load of a pass is issued before the first MMA.
__device__ __forceinline__ uint4 ld_nc4(const uint4* p) {
  uint4 v;
  asm volatile("ld.global.nc.v4.u32 {%0,%1,%2,%3}, [%4];\n" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}
__device__ __forceinline__ uint2 ld_nc2(const uint2* p) {
  uint2 v;
  asm volatile("ld.global.nc.v2.u32 {%0,%1}, [%2];\n" : "=r"(v.x), "=r"(v.y) : "l"(p));
  return v;
}

// Chunks of 256 k per warp and pass, all loaded before the first MMA (2 x 16 bytes per lane and chunk).
constexpr int kSlab = 10;

// A block holds TPB row tiles of 16 x KSPLIT warps; warp (tile, part) takes the tile's chunks
// [part * cpp, (part + 1) * cpp) (cpp = ceil(kc / KSPLIT), at most kSlab per pass) for the block's TM tokens
// m0 .. m0 + TM - 1 (grid.y). Per chunk and token: two MMAs, the P plane with the activation planes and the N plane
// with their complement (ternary_tcb.h). Weights (and the row counts) are read before the programmatic-dependent-
// launch wait, the activation planes after it. The planes of one token are xb [kc][32 lanes][2] (lane (j, t) reads
// its own 2 words per chunk, a warp 256 contiguous bytes): at one token straight into registers with the weights;
// for 2..16 tokens the block first copies its tokens' planes into shared memory (same order: conflict-free).
// Dynamic shared memory: TM > 1: TM * kc * 32 uint2 planes, then (KS > 1) [warps][TM][16] int partial sums.
// KS = ksplit and the tiles per block TPB = max(1, 4 / KS) are compile-time (no integer division at entry).
template <int TM, int KS>
__global__ void __launch_bounds__(128, 1) tcb_kernel(const uint4* __restrict__ w, const int32_t* __restrict__ negc,
                                                     int n, int kc, const uint2* __restrict__ xb,
                                                     const float* __restrict__ inv_s, int M, Epi ep) {
  extern __shared__ uint2 smem_tcb[];
  uint2* xs = smem_tcb;
  int* red = reinterpret_cast<int*>(smem_tcb + (TM > 1 ? TM * kc * 32 : 0));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  constexpr int ksplit = KS, tpb = KS >= 4 ? 1 : 4 / KS;
  const int tile = blockIdx.x * tpb + warp / ksplit, part = warp % ksplit;
  const int m0 = blockIdx.y * TM;
  const int cpp = (kc + ksplit - 1) / ksplit;
  const int c0 = part * cpp, c1 = min(kc, c0 + cpp);
  const bool live = tile * 16 < n;
  const int g = lane / 4, t = lane % 4;
  // Loads are unconditional (no branch between them): a tile past n reads the last tile, chunks past the warp's
  // range re-read its last chunk; neither is multiplied.
  const uint4* wt = w + (static_cast<int64_t>(min(tile, (n - 1) / 16)) * kc * 2) * 32 + lane;
  int neg0 = 0, neg1 = 0;
  if (live && part == 0 && t == 0) {
    neg0 = negc[tile * 16 + g];
    neg1 = negc[tile * 16 + g + 8];
  }
  int acc[TM][4];
#pragma unroll
  for (int m = 0; m < TM; ++m) acc[m][0] = acc[m][1] = acc[m][2] = acc[m][3] = 0;
  // Up to 4 tokens the N-plane MMAs go into a second accumulator set: two independent MMA chains per token.
  constexpr bool kTwo = TM <= 4;
  int acc2[kTwo ? TM : 1][4];
#pragma unroll
  for (int m = 0; m < (kTwo ? TM : 1); ++m) acc2[m][0] = acc2[m][1] = acc2[m][2] = acc2[m][3] = 0;

  for (int s0 = c0, pass = 0; s0 < c1 || pass == 0; s0 += kSlab, ++pass) {
    const int ns = max(0, min(kSlab, c1 - s0));
    uint4 a[kSlab][2];
    uint32_t touch = 0;
    if (ns > 0) {
#pragma unroll
      for (int c = 0; c < kSlab; ++c) {
        const int64_t cc = min(s0 + c, c1 - 1);
        a[c][0] = ld_nc4(wt + (cc * 2) * 32);
        a[c][1] = ld_nc4(wt + (cc * 2 + 1) * 32);
      }
    }
    uint2 bx[TM == 1 ? kSlab : 1];
    if (pass == 0) {
      pdl_trigger();
      pdl_wait();
      if (TM > 1) {  // the block's tokens' planes -> shared memory [m][chunk][lane]
        const int per = kc * 32;
        for (int i = threadIdx.x; i < TM * per; i += blockDim.x) {
          xs[i] = m0 + i / per < M ? xb[static_cast<int64_t>(m0) * per + i] : make_uint2(0u, 0u);
        }
        __syncthreads();
      }
    }
    if (ns == 0) break;
    if (TM == 1) {  // the token's planes for the slab, requested now with the weights in flight
      const uint2* xm = xb + (static_cast<int64_t>(m0) * kc + s0) * 32 + lane;
#pragma unroll
      for (int c = 0; c < kSlab; ++c) bx[TM == 1 ? c : 0] = ld_nc2(xm + min(c, ns - 1) * 32);
#pragma unroll
      for (int c = 0; c < kSlab; ++c) touch ^= bx[TM == 1 ? c : 0].x;
    }
    // A value that depends on every load, used under a condition that is never true (n > 0): keeps ptxas from
    // sinking each load next to its MMA (one dependent round trip per chunk). Computed only after the last load
    // is issued: it waits for all of them.
#pragma unroll
    for (int c = 0; c < kSlab; ++c) touch ^= a[c][0].x ^ a[c][1].x;
    if (touch == 0x9e3779b9u && n < 0) red[0] = static_cast<int>(touch);
    // Chunks past the warp's range multiply zero weights (no branch between the MMAs).
#pragma unroll
    for (int c = 0; c < kSlab; ++c)
      if (c >= ns) a[c][0] = a[c][1] = make_uint4(0u, 0u, 0u, 0u);
#pragma unroll
    for (int c = 0; c < kSlab; ++c) {
#pragma unroll
      for (int m = 0; m < TM; ++m) {
        if (TM > 1 && m0 + m >= M) break;
        const uint2 b = TM == 1 ? bx[TM == 1 ? c : 0] : xs[(m * kc + s0 + min(c, ns - 1)) * 32 + lane];
        bmma_and(acc[m], a[c][0], b.x, b.y);
        bmma_and(kTwo ? acc2[kTwo ? m : 0] : acc[m], a[c][1], ~b.x, ~b.y);
      }
    }
  }
  if (kTwo) {
#pragma unroll
    for (int m = 0; m < TM; ++m)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[m][e] += acc2[kTwo ? m : 0][e];
  }
  int lo[TM], hi[TM];
#pragma unroll
  for (int m = 0; m < TM; ++m) tcb_rows(acc[m], lo[m], hi[m]);
  if (ksplit > 1) {
    if (t == 0) {
#pragma unroll
      for (int m = 0; m < TM; ++m) {
        red[(warp * TM + m) * 16 + g] = lo[m];
        red[(warp * TM + m) * 16 + g + 8] = hi[m];
      }
    }
    __syncthreads();
    if (part != 0) return;
    if (t == 0) {
#pragma unroll
      for (int m = 0; m < TM; ++m)
        for (int p = 1; p < ksplit; ++p) {
          lo[m] += red[((warp + p) * TM + m) * 16 + g];
          hi[m] += red[((warp + p) * TM + m) * 16 + g + 8];
        }
    }
  }
  if (!live || t != 0) return;
  const int r0 = tile * 16 + g, r1 = r0 + 8;
#pragma unroll
  for (int m = 0; m < TM; ++m) {
    if (m0 + m >= M) break;
    const float is = ep.acc_out ? 0.f : inv_s[m0 + m];
    if (r0 < n) store_result(ep, n, m0 + m, r0, lo[m] + neg0, is);
    if (r1 < n) store_result(ep, n, m0 + m, r1, hi[m] + neg1, is);
  }
}

// Bit planes of int8 rows q [rows, kp] (kp = 256 * kc): one warp per 128 consecutive k of a row; lane l holds
// the 4 codes of k = 128 blk + 4 l .. + 3 (warp_planes in row_ops.cuh transposes them).
__global__ void tcb_planes_kernel(const int8_t* __restrict__ q, int kc, uint32_t* __restrict__ xb) {
  pdl_trigger();
  pdl_wait();
  const int r = blockIdx.y;
  const int blk = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  if (blk >= 2 * kc) return;  // warp-uniform
  const uint32_t codes[1] = {
      reinterpret_cast<const uint32_t*>(q + static_cast<int64_t>(r) * kc * 256)[blk * 32 + threadIdx.x % 32]};
  warp_planes<1>(codes, blk, 0, 2 * kc, xb + static_cast<int64_t>(r) * kc * 64);
}

// tcb -> tc2 (ternary_tc2.h) for rows of more than one token: one thread per tc2 word (row r, k = 16 j .. 16 j +
// 15); byte b, bits 2g of it is the code of k = 16 j + 4 g + b, which in tcb is bit i = 4 (j % 8) + g of register
// (h = (j % 16) / 8, row half) of lane (r % 8) * 4 + b in chunk j / 16. Rows past the tcb rows get code 1 (w = 0).
__global__ void tcb_to_tc2_kernel(const uint32_t* __restrict__ w, int tcb_rows, int kc, int np2,
                                  uint32_t* __restrict__ out) {
  pdl_trigger();
  pdl_wait();
  const int wpr = kc * 16;  // tc2 words per row (kp / 16)
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= static_cast<int64_t>(np2) * wpr) return;
  const int r = static_cast<int>(idx / wpr), j = static_cast<int>(idx % wpr);
  if (r >= tcb_rows) {
    out[idx] = 0x55555555u;
    return;
  }
  const int tile = r / 16, g = r % 8, hi = (r % 16) / 8, c = j / 16, h = (j % 16) / 8, i0 = 4 * (j % 8);
  uint32_t word = 0;
#pragma unroll
  for (int b = 0; b < 4; ++b) {
    const int64_t base = (((static_cast<int64_t>(tile) * kc + c) * 2) * 32 + g * 4 + b) * 4 + h * 2 + hi;
    const uint32_t p = (w[base] >> i0) & 0xfu, n = (w[base + 32 * 4] >> i0) & 0xfu;
#pragma unroll
    for (int gg = 0; gg < 4; ++gg) {
      const uint32_t code = 1u + ((p >> gg) & 1u) - ((n >> gg) & 1u);
      word |= code << (8 * b + 2 * gg);
    }
  }
  out[idx] = word;
}

template <int TM, int KS>
void launch_tcb(const uint32_t* w, const int32_t* negc, int n, int kc, const uint32_t* xb, const float* inv_s,
                int M, const Epi& ep, cudaStream_t st) {
  const int tiles = (n + 15) / 16;
  // Blocks of about 4 warps: tiles per block x ksplit warps each.
  constexpr int ksplit = KS, tpb = KS >= 4 ? 1 : 4 / KS;
  const dim3 grid((tiles + tpb - 1) / tpb, (M + TM - 1) / TM);
  const size_t smem = (TM > 1 ? static_cast<size_t>(TM) * kc * 32 * sizeof(uint2) : 0) +
                      (ksplit > 1 ? static_cast<size_t>(tpb * ksplit) * TM * 16 * sizeof(int) : 0);
  static int smem_set = 48 * 1024;  // the opt-in limit set so far for this instantiation (set before capture)
  if (static_cast<int>(smem) > smem_set) {
    check(cudaFuncSetAttribute(tcb_kernel<TM, KS>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)),
          "tcb GEMV smem attribute");
    smem_set = static_cast<int>(smem);
  }
  launch(tcb_kernel<TM, KS>, grid, dim3(tpb * ksplit * 32), smem, st, "ternary tcb GEMV",
         reinterpret_cast<const uint4*>(w), negc, n, kc, reinterpret_cast<const uint2*>(xb), inv_s, M, ep);
}

template <int TM>
void launch_tcb_ks(int ksplit, const uint32_t* w, const int32_t* negc, int n, int kc, const uint32_t* xb,
                   const float* inv_s, int M, const Epi& ep, cudaStream_t st) {
  switch (ksplit) {
    case 1: launch_tcb<TM, 1>(w, negc, n, kc, xb, inv_s, M, ep, st); break;
    case 2: launch_tcb<TM, 2>(w, negc, n, kc, xb, inv_s, M, ep, st); break;
    case 3: launch_tcb<TM, 3>(w, negc, n, kc, xb, inv_s, M, ep, st); break;
    default: launch_tcb<TM, 4>(w, negc, n, kc, xb, inv_s, M, ep, st); break;
  }
}

void run_tcb(const uint32_t* w, const int32_t* negc, int n, int kp, const uint32_t* xb, const float* inv_s, int M,
             const Epi& ep, cudaStream_t st, int ksplit) {
  if (n <= 0 || kp <= 0 || kp % 256 || M <= 0) check(cudaErrorInvalidValue, "tcb_matmul (bad shape)");
  const int kc = kp / 256;
  // Automatic: the fewest warps per tile whose parts fit one pass of kSlab chunks (measured on the H200, one token:
  // splitting further was slower on every 2B4T shape; bench/CUDA_NOTES.md, "Ternary GEMV and GEMM kernels").
  if (ksplit == 0) ksplit = std::min(4, (kc + kSlab - 1) / kSlab);
  if (ksplit < 1 || ksplit > 4) check(cudaErrorInvalidValue, "tcb_matmul (ksplit: 1..4)");
  if (M == 1) launch_tcb_ks<1>(ksplit, w, negc, n, kc, xb, inv_s, M, ep, st);
  else if (M == 2) launch_tcb_ks<2>(ksplit, w, negc, n, kc, xb, inv_s, M, ep, st);
  else if (M <= 4) launch_tcb_ks<4>(ksplit, w, negc, n, kc, xb, inv_s, M, ep, st);
  else if (M <= 8) launch_tcb_ks<8>(ksplit, w, negc, n, kc, xb, inv_s, M, ep, st);
  else launch_tcb_ks<16>(ksplit, w, negc, n, kc, xb, inv_s, M, ep, st);
}

}  // namespace

bool tcb_supported() {
  static const bool ok = [] {
    int dev = 0, major = 0;
    if (cudaGetDevice(&dev) != cudaSuccess) return false;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess) return false;
    return major >= 8;
  }();
  return ok;
}

void tcb_matmul(const uint32_t* w, const int32_t* neg_count, int n, int kp, const uint32_t* xb, const float* inv_s,
                int M, const TernaryEpilogue& e, cudaStream_t stream, int ksplit) {
  if (!tcb_supported()) check(cudaErrorInvalidDevice, "tcb_matmul (binary tensor-core MMA needs sm_80 or newer)");
  run_tcb(w, neg_count, n, kp, xb, inv_s, M, make_epi(e), stream, ksplit);
}

void tcb_matmul_i32(const uint32_t* w, const int32_t* neg_count, int n, int kp, const uint32_t* xb, int M,
                    int32_t* acc, cudaStream_t stream, int ksplit) {
  if (!tcb_supported()) check(cudaErrorInvalidDevice, "tcb_matmul (binary tensor-core MMA needs sm_80 or newer)");
  run_tcb(w, neg_count, n, kp, xb, nullptr, M, make_epi_i32(acc), stream, ksplit);
}

void tcb_to_tc2(const uint32_t* w, int n, int kp, uint32_t* out, int np2, cudaStream_t stream) {
  if (n <= 0 || kp <= 0 || kp % 256 || np2 < n || np2 % 64) check(cudaErrorInvalidValue, "tcb_to_tc2 (bad shape)");
  const int64_t words = static_cast<int64_t>(np2) * (kp / 16);
  launch(tcb_to_tc2_kernel, dim3(static_cast<unsigned>((words + 255) / 256)), dim3(256), 0, stream, "tcb_to_tc2", w,
         (n + 15) / 16 * 16, kp / 256, np2, out);
}

void tcb_planes(const int8_t* q, int rows, int kp, uint32_t* xb, cudaStream_t stream) {
  if (rows <= 0) return;
  if (kp <= 0 || kp % 256) check(cudaErrorInvalidValue, "tcb_planes (kp not a positive multiple of 256)");
  const int blocks128 = kp / 128;
  launch(tcb_planes_kernel, dim3((blocks128 + 7) / 8, rows), dim3(256), 0, stream, "tcb_planes", q, kp / 256, xb);
}

}  // namespace tritium::cuda
