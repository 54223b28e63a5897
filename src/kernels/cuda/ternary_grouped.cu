// tritium kernels/cuda: the group-scaled ternary GEMV/GEMM (Ternary Bonsai's per-group-of-128 scales) over tc2
// weights, dp4a with exact int32 group sums and the CPU's float arithmetic per group.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/kernels.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/ternary_epilogue.cuh"

namespace tritium::cuda {
namespace {

constexpr uint32_t kMask = 0x03030303u;
constexpr int kGroupPieces = 2;  // 16-byte tc2 pieces (64 weights each) per group of 128 along K

// dp4a with unsigned 8-bit codes in the first operand and signed int8 activations (see ternary.cu).
__device__ __forceinline__ int dp4a_us(uint32_t a, int b, int c) {
  int d;
  asm("dp4a.u32.s32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}

// LPR lanes per weight row, 32 / LPR rows per warp, WARPS warps per block; a block takes MT tokens (blockIdx.x) of
// its rows (blockIdx.y), so consecutive blocks read the same weight rows (L2 reuse over token tiles). The tokens'
// activations are staged in shared memory as [m][q][piece] uint4 (the layout of the tc2 GEMV), followed by their
// group sums sx [m][G]. Lane `sub` of a row takes groups sub, sub + LPR, ...: both 16-byte pieces of a group, so it
// holds the group's exact sum sum_k c_k x_k - sum_k x_k = sum_k w_k x_k. Each round of LPR groups, the row's lanes
// exchange their terms gs * float(sum) by shuffles and every lane adds them in increasing group order, so the float
// sum is the CPU's (ternary_gemm_f32: from 0.0f, a multiplication then an addition per group, never fused).
template <int MT, int LPR, int WARPS>
__global__ void __launch_bounds__(WARPS * 32) tc2_grouped_kernel(const uint4* __restrict__ w,
                                                                 const float* __restrict__ gs,
                                                                 const float* __restrict__ bias, int n, int nch,
                                                                 int G, const int8_t* __restrict__ xq,
                                                                 const float* __restrict__ inv_s, int M, Epi ep) {
  extern __shared__ uint4 xs[];
  int* sx = reinterpret_cast<int*>(xs + MT * 4 * nch);
  constexpr int RPW = 32 / LPR;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int row = (blockIdx.y * WARPS + warp) * RPW + lane / LPR;
  const int sub = lane % LPR, base = lane - sub;
  const int m0 = blockIdx.x * MT, mt = min(MT, M - m0);
  const uint4* wr = w + static_cast<int64_t>(row) * nch;

  // The first group's weights in flight before waiting for the activations.
  uint4 wv[kGroupPieces];
#pragma unroll
  for (int p = 0; p < kGroupPieces; ++p) {
    const int c = kGroupPieces * sub + p;
    wv[p] = sub < G && c < nch ? __ldg(wr + c) : make_uint4(0, 0, 0, 0);
  }
  pdl_trigger();
  pdl_wait();
  const uint4* xg = reinterpret_cast<const uint4*>(xq) + static_cast<int64_t>(m0) * nch * 4;
  for (int i = threadIdx.x; i < MT * nch * 4; i += WARPS * 32) {
    const int m = i / (nch * 4), rem = i % (nch * 4);
    xs[(m * 4 + (rem & 3)) * nch + (rem >> 2)] = m < mt ? xg[i] : make_uint4(0, 0, 0, 0);
  }
  __syncthreads();
  for (int i = threadIdx.x; i < MT * G; i += WARPS * 32) {
    const int m = i / G, g = i % G;
    int s = 0;
    for (int c = kGroupPieces * g; c < min(kGroupPieces * (g + 1), nch); ++c)
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const uint4 v = xs[(m * 4 + q) * nch + c];
        s = __dp4a(static_cast<int>(v.x), 0x01010101, s);
        s = __dp4a(static_cast<int>(v.y), 0x01010101, s);
        s = __dp4a(static_cast<int>(v.z), 0x01010101, s);
        s = __dp4a(static_cast<int>(v.w), 0x01010101, s);
      }
    sx[i] = s;
  }
  __syncthreads();

  float s[MT];
#pragma unroll
  for (int m = 0; m < MT; ++m) s[m] = 0.0f;
  for (int g0 = 0; g0 < G; g0 += LPR) {
    const int g = g0 + sub;
    int acc[MT][4];
#pragma unroll
    for (int m = 0; m < MT; ++m) acc[m][0] = acc[m][1] = acc[m][2] = acc[m][3] = 0;
#pragma unroll
    for (int p = 0; p < kGroupPieces; ++p) {
      const int c = kGroupPieces * g + p;
      if (g >= G || c >= nch) break;
      const uint32_t words[4] = {wv[p].x, wv[p].y, wv[p].z, wv[p].w};
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        uint32_t cw[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) cw[j] = words[q] & (kMask << (2 * j));
#pragma unroll
        for (int m = 0; m < MT; ++m) {
          const uint4 xv = xs[(m * 4 + q) * nch + c];
          acc[m][0] = dp4a_us(cw[0], static_cast<int>(xv.x), acc[m][0]);
          acc[m][1] = dp4a_us(cw[1], static_cast<int>(xv.y), acc[m][1]);
          acc[m][2] = dp4a_us(cw[2], static_cast<int>(xv.z), acc[m][2]);
          acc[m][3] = dp4a_us(cw[3], static_cast<int>(xv.w), acc[m][3]);
        }
      }
    }
    // The next round's weights in flight while this round's terms are exchanged.
    const int gn = g + LPR;
#pragma unroll
    for (int p = 0; p < kGroupPieces; ++p) {
      const int c = kGroupPieces * gn + p;
      wv[p] = gn < G && c < nch ? __ldg(wr + c) : make_uint4(0, 0, 0, 0);
    }
    const float sc = g < G && row < n ? __ldg(gs + static_cast<int64_t>(row) * G + g) : 0.0f;
    float term[MT];
#pragma unroll
    for (int m = 0; m < MT; ++m) {
      const int v = acc[m][0] + (acc[m][1] >> 2) + (acc[m][2] >> 4) + (acc[m][3] >> 6) - (g < G ? sx[m * G + g] : 0);
      term[m] = __fmul_rn(sc, static_cast<float>(v));
    }
    const int last = min(LPR, G - g0);
    for (int j = 0; j < last; ++j)
#pragma unroll
      for (int m = 0; m < MT; ++m) s[m] = __fadd_rn(s[m], __shfl_sync(0xffffffffu, term[m], base + j));
  }
  if (row >= n) return;
#pragma unroll
  for (int m = 0; m < MT; ++m) {
    if (m % LPR != sub || m >= mt) continue;
    float v = __fmul_rn(inv_s[m0 + m], s[m]);
    if (bias) v = __fadd_rn(v, bias[row]);
    float* p = ep.y + static_cast<int64_t>(m0 + m) * ep.ldy + row;
    *p = ep.add ? __fadd_rn(*p, v) : v;
  }
}

template <int MT>
void launch_grouped(const uint32_t* w, const float* gs, const float* bias, int n, int np, int k, int kp,
                    const int8_t* xq, const float* inv_s, int M, const Epi& ep, cudaStream_t st) {
  constexpr int LPR = 8, WARPS = 4, RPB = WARPS * (32 / LPR);
  const int nch = kp / 64, G = (k + 127) / 128;
  const size_t smem = static_cast<size_t>(MT) * kp + static_cast<size_t>(MT) * G * sizeof(int);
  auto kern = tc2_grouped_kernel<MT, LPR, WARPS>;
  static int smem_set = 48 * 1024;  // the opt-in limit set so far for this instantiation (set before capture)
  if (static_cast<int>(smem) > smem_set) {
    check(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)),
          "group-scaled ternary GEMM smem attribute");
    smem_set = static_cast<int>(smem);
  }
  launch(kern, dim3((M + MT - 1) / MT, np / RPB), dim3(WARPS * 32), smem, st, "group-scaled ternary GEMM",
         reinterpret_cast<const uint4*>(w), gs, bias, n, nch, G, xq, inv_s, M, ep);
}

}  // namespace

void ternary_grouped_matmul(const uint32_t* w, const float* group_scales, const float* bias, int n, int np, int k,
                            int kp, const int8_t* xq, const float* inv_s, int M, const TernaryEpilogue& ep,
                            cudaStream_t stream) {
  if (!w || !group_scales || !xq || !inv_s || !ep.y || n <= 0 || k <= 0 || M <= 0)
    check(cudaErrorInvalidValue, "ternary_grouped_matmul (null buffer or empty shape)");
  if (np < n || np % 16 != 0 || kp < k || kp % 64 != 0 || kp - k >= 64 || ep.ldy < n)
    check(cudaErrorInvalidValue, "ternary_grouped_matmul (bad padded shape)");
  const Epi e = make_epi(ep);
  if (M == 1) return launch_grouped<1>(w, group_scales, bias, n, np, k, kp, xq, inv_s, M, e, stream);
  if (M == 2) return launch_grouped<2>(w, group_scales, bias, n, np, k, kp, xq, inv_s, M, e, stream);
  if (M <= 4) return launch_grouped<4>(w, group_scales, bias, n, np, k, kp, xq, inv_s, M, e, stream);
  launch_grouped<8>(w, group_scales, bias, n, np, k, kp, xq, inv_s, M, e, stream);
}

}  // namespace tritium::cuda
