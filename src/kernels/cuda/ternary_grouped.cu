// tritium kernels/cuda: the group-scaled ternary GEMV/GEMM (Ternary Bonsai's per-group-of-128 scales) over tc2
// weights, exact int32 group sums and the CPU's float arithmetic per group: dp4a for up to 4 tokens (8 on rows of
// fewer than 16,384 weight rows), the int8 tensor cores (mma.sync m16n8k32) above.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/kernels.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/tc2_ops.cuh"
#include "kernels/cuda/ternary_epilogue.cuh"

namespace tritium::cuda {
namespace {

constexpr int kGroupPieces = 2;  // 16-byte tc2 pieces (64 weights each) per group of 128 along K
constexpr int kLanesPerRow = 8;  // lanes of the dp4a kernel per weight row (see launch_grouped_dp4a)
constexpr int kMmaRowsFrom5 = 16384;  // from this many weight rows, 5-8 tokens go to the tensor-core kernel

// LPR lanes per weight row, 32 / LPR rows per warp, WARPS warps per block; a block takes MT tokens (blockIdx.x) of
// its rows (blockIdx.y), so consecutive blocks read the same weight rows (L2 reuse over token tiles). The tokens'
// activations are staged in shared memory as [m][q][piece] uint4 (the layout of the tc2 GEMV), followed by their
// group sums sx [m][G]. A round covers LPR * D groups of the row: lane `sub` takes groups g0 + d * LPR + sub
// (d < D), both 16-byte pieces of each, so it holds a group's exact sum sum_k c_k x_k - sum_k x_k = sum_k w_k x_k.
// The next round's pieces and scales are loaded before this round's are used (2 * D pieces per lane in flight
// while the GPU works on D), and the first round's before the activations are waited for. The row's lanes then
// exchange their terms gs * float(sum) by shuffles and every lane adds them in increasing group order (d outer,
// lane inner), so the float sum is the CPU's (ternary_gemm_f32: from 0.0f, a multiplication then an addition per
// group, never fused) whatever LPR and D are.
template <int MT, int LPR, int D, int WARPS>
__global__ void __launch_bounds__(WARPS * 32) tc2_grouped_kernel(const uint4* __restrict__ w,
                                                                 const float* __restrict__ gs,
                                                                 const float* __restrict__ bias, int n, int nch,
                                                                 int G, const int8_t* __restrict__ xq,
                                                                 const float* __restrict__ inv_s, int M, Epi ep) {
  extern __shared__ uint4 xs[];
  int* sx = reinterpret_cast<int*>(xs + MT * 4 * nch);
  constexpr int RPW = 32 / LPR, R = LPR * D;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int row = (blockIdx.y * WARPS + warp) * RPW + lane / LPR;
  const int sub = lane % LPR, base = lane - sub;
  const int m0 = blockIdx.x * MT, mt = min(MT, M - m0);
  const uint4* wr = w + static_cast<int64_t>(row) * nch;
  const float* gr = gs + static_cast<int64_t>(row) * G;

  uint4 wv[D][kGroupPieces];
  float sv[D];
  auto load = [&](uint4 (&v)[D][kGroupPieces], float (&sc)[D], int g0) {
#pragma unroll
    for (int d = 0; d < D; ++d) {
      const int g = g0 + d * LPR + sub;
#pragma unroll
      for (int p = 0; p < kGroupPieces; ++p) {
        const int c = kGroupPieces * g + p;
        v[d][p] = g < G && c < nch ? __ldg(wr + c) : make_uint4(0, 0, 0, 0);
      }
      sc[d] = g < G && row < n ? __ldg(gr + g) : 0.0f;
    }
  };
  load(wv, sv, 0);
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
  for (int g0 = 0; g0 < G; g0 += R) {
    uint4 nv[D][kGroupPieces];
    float ns[D];
    load(nv, ns, g0 + R);
    float term[D][MT];
#pragma unroll
    for (int d = 0; d < D; ++d) {
      const int g = g0 + d * LPR + sub;
      int acc[MT][4];
#pragma unroll
      for (int m = 0; m < MT; ++m) acc[m][0] = acc[m][1] = acc[m][2] = acc[m][3] = 0;
#pragma unroll
      for (int p = 0; p < kGroupPieces; ++p) {
        const int c = kGroupPieces * g + p;
        if (g >= G || c >= nch) break;
        const uint32_t words[4] = {wv[d][p].x, wv[d][p].y, wv[d][p].z, wv[d][p].w};
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          uint32_t cw[4];
#pragma unroll
          for (int j = 0; j < 4; ++j) cw[j] = words[q] & (kTc2Mask << (2 * j));
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
#pragma unroll
      for (int m = 0; m < MT; ++m) {
        const int v =
            acc[m][0] + (acc[m][1] >> 2) + (acc[m][2] >> 4) + (acc[m][3] >> 6) - (g < G ? sx[m * G + g] : 0);
        term[d][m] = __fmul_rn(sv[d], static_cast<float>(v));
      }
    }
#pragma unroll
    for (int d = 0; d < D; ++d) {
      const int last = min(LPR, G - (g0 + d * LPR));  // warp-uniform; <= 0 past the row's last group
      for (int j = 0; j < last; ++j)
#pragma unroll
        for (int m = 0; m < MT; ++m) s[m] = __fadd_rn(s[m], __shfl_sync(0xffffffffu, term[d][m], base + j));
    }
#pragma unroll
    for (int d = 0; d < D; ++d) {
      sv[d] = ns[d];
#pragma unroll
      for (int p = 0; p < kGroupPieces; ++p) wv[d][p] = nv[d][p];
    }
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

template <int MT, int LPR, int D>
void launch_grouped(const uint32_t* w, const float* gs, const float* bias, int n, int np, int k, int kp,
                    const int8_t* xq, const float* inv_s, int M, const Epi& ep, cudaStream_t st) {
  constexpr int WARPS = 4, RPB = WARPS * (32 / LPR);
  const int nch = kp / 64, G = (k + 127) / 128;
  const size_t smem = static_cast<size_t>(MT) * kp + static_cast<size_t>(MT) * G * sizeof(int);
  auto kern = tc2_grouped_kernel<MT, LPR, D, WARPS>;
  static int smem_set = 48 * 1024;  // the opt-in limit set so far for this instantiation (set before capture)
  if (static_cast<int>(smem) > smem_set) {
    check(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)),
          "group-scaled ternary GEMM smem attribute");
    smem_set = static_cast<int>(smem);
  }
  launch(kern, dim3((M + MT - 1) / MT, np / RPB), dim3(WARPS * 32), smem, st, "group-scaled ternary GEMM",
         reinterpret_cast<const uint4*>(w), gs, bias, n, nch, G, xq, inv_s, M, ep);
}

// dp4a launch for MT tokens, D groups per lane and round: 0 = the automatic choice. The sweep of
// `cuda-bench --grouped-kernels` on the Qwen3-8B shapes (H100): 8 lanes per row beat 16 and 32 at every token count
// and shape, by up to 1.2x at one token and 1.8x at eight (fewer rows per warp leave more warps waiting on the
// activations' staging and the shuffles); 2 groups per round win from 2 tokens on the long rows (down 4096 x 12288:
// 9.5 vs 11.0 us at one token) and up to 4 tokens elsewhere within 3%, 4 groups lose everywhere; at 5-8 tokens 1.
template <int MT>
void launch_grouped_dp4a(const uint32_t* w, const float* gs, const float* bias, int n, int np, int k, int kp,
                         const int8_t* xq, const float* inv_s, int M, const Epi& ep, cudaStream_t st, int depth) {
  if (depth == 0) depth = MT <= 4 ? 2 : 1;
  if (depth == 1) return launch_grouped<MT, kLanesPerRow, 1>(w, gs, bias, n, np, k, kp, xq, inv_s, M, ep, st);
  if (depth == 2) return launch_grouped<MT, kLanesPerRow, 2>(w, gs, bias, n, np, k, kp, xq, inv_s, M, ep, st);
  check(cudaErrorInvalidValue, "ternary_grouped_matmul (up to 8 tokens: 1 or 2 groups per lane and round)");
}


// Tensor-core GEMM for more than 8 tokens. A warp takes 16 TM tokens x 8 NT weight rows (TM MMA tiles of tokens x NT
// of rows) and walks the groups of 128 in increasing order; a block's 4 warps take consecutive row tiles of the same
// tokens, so the activations a warp loads are the other warps' L1 hits, and consecutive blocks (blockIdx.x, token
// tiles) read the same weight rows (L2 reuse).
//
// The 128 k of a group are assigned to MMA operand slots in a permuted order, the same for the activations and the
// weights (a group's sum does not depend on the order): slot (thread t, step s = 0..3, register r = 0 / 1, byte b)
// is k = 32t + 8s + 4r + b. So thread (g, t) loads bytes 32t .. 32t + 31 of its tokens' activations with two 16-byte
// loads (word 2s + r is the A register of step s), and the matching weights lie in tc2 words 2t and 2t + 1 of the
// group's 8 (one 8-byte load per weight row): k 32t + 8s + 4r + b is code group 2(s % 2) + r of word 2t + s / 2.
//
// The MMA accumulator starts at 0x4B400000 - sum_k x[m, k] (the group's activation sum, by dp4a over the loaded
// bytes and a shuffle over the 4 lanes of a token), so after the 4 steps it holds the bit pattern of the float
// 1.5 * 2^23 + sum_k w x (codes c = w + 1: sum c x - sum x; |sum| < 2^16), and one exact float subtraction gives
// float(sum). Then s += gs * float(sum) with a multiplication and an addition per group, in increasing group order:
// the CPU's arithmetic, as in the dp4a kernel. The next group's weights, scales and activations are loaded before
// the current group is multiplied.
template <int TM, int NT>
__global__ void __launch_bounds__(128) tc2_grouped_mma_kernel(const uint32_t* __restrict__ w,
                                                              const float* __restrict__ gs,
                                                              const float* __restrict__ bias, int n, int np, int kw,
                                                              int G, const int8_t* __restrict__ xq,
                                                              const float* __restrict__ inv_s, int M, int kp, Epi ep) {
  constexpr int kMagic = 0x4B400000;  // the bit pattern of 1.5 * 2^23
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int m0 = blockIdx.x * 16 * TM;
  const int r0 = (blockIdx.y * 4 + warp) * 8 * NT;

  // Operands of one group: activations of tokens g and g + 8 of each token tile (2 x 16 bytes each), this lane's
  // two words of each weight row g of the row tiles, and the scales of output rows 2t and 2t + 1 of each row tile.
  struct Ops {
    uint4 x[TM][2][2];
    uint2 w[NT];
    float sc[NT][2];
  };
  auto load_w = [&](Ops& o, int grp) {
    const int word = 8 * grp + 2 * t;
#pragma unroll
    for (int j = 0; j < NT; ++j) {
      const int row = r0 + 8 * j + g;
      o.w[j] = row < np && word < kw
                   ? __ldg(reinterpret_cast<const uint2*>(w + static_cast<int64_t>(row) * kw + word))
                   : make_uint2(0, 0);
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int orow = r0 + 8 * j + 2 * t + e;
        o.sc[j][e] = orow < n ? __ldg(gs + static_cast<int64_t>(orow) * G + grp) : 0.0f;
      }
    }
  };
  auto load_x = [&](Ops& o, int grp) {
    const int64_t k = static_cast<int64_t>(grp) * 128 + 32 * t;
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int m = m0 + 16 * i + g + 8 * h;
        const bool ok = m < M && k < kp;  // kp is a multiple of 64: a lane's 32 bytes are all in or all out
        const uint4* p = reinterpret_cast<const uint4*>(xq + static_cast<int64_t>(m) * kp + k);
        o.x[i][h][0] = ok ? p[0] : make_uint4(0, 0, 0, 0);
        o.x[i][h][1] = ok ? p[1] : make_uint4(0, 0, 0, 0);
      }
  };

  Ops cur, nxt;
  load_w(cur, 0);
  pdl_trigger();
  pdl_wait();
  load_x(cur, 0);

  float s[TM][NT][4];
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < NT; ++j) s[i][j][0] = s[i][j][1] = s[i][j][2] = s[i][j][3] = 0.0f;

  for (int grp = 0; grp < G; ++grp) {
    if (grp + 1 < G) {
      load_w(nxt, grp + 1);
      load_x(nxt, grp + 1);
    }
    int d[TM][NT][4];
#pragma unroll
    for (int i = 0; i < TM; ++i) {
      int sum[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        int v = 0;
#pragma unroll
        for (int q = 0; q < 2; ++q) {
          const uint4 x = cur.x[i][h][q];
          v = __dp4a(static_cast<int>(x.x), 0x01010101, v);
          v = __dp4a(static_cast<int>(x.y), 0x01010101, v);
          v = __dp4a(static_cast<int>(x.z), 0x01010101, v);
          v = __dp4a(static_cast<int>(x.w), 0x01010101, v);
        }
        v += __shfl_xor_sync(0xffffffffu, v, 1);
        v += __shfl_xor_sync(0xffffffffu, v, 2);
        sum[h] = kMagic - v;
      }
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        d[i][j][0] = d[i][j][1] = sum[0];
        d[i][j][2] = d[i][j][3] = sum[1];
      }
    }
#pragma unroll
    for (int st = 0; st < 4; ++st) {
      uint32_t b[NT][2];
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        const uint32_t word = st < 2 ? cur.w[j].x : cur.w[j].y;
        const int sh = 4 * (st % 2);
        b[j][0] = (word >> sh) & kTc2Mask;
        b[j][1] = (word >> (sh + 2)) & kTc2Mask;
      }
#pragma unroll
      for (int i = 0; i < TM; ++i) {
        const uint32_t* x0 = reinterpret_cast<const uint32_t*>(&cur.x[i][0][st / 2]);
        const uint32_t* x1 = reinterpret_cast<const uint32_t*>(&cur.x[i][1][st / 2]);
        const int wi = 2 * (st % 2);
#pragma unroll
        for (int j = 0; j < NT; ++j) mma_s8(d[i][j], x0[wi], x1[wi], x0[wi + 1], x1[wi + 1], b[j][0], b[j][1]);
      }
    }
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
      for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float f = __fsub_rn(__int_as_float(d[i][j][e]), 12582912.0f);
          s[i][j][e] = __fadd_rn(s[i][j][e], __fmul_rn(cur.sc[j][e % 2], f));
        }
    if (grp + 1 < G) cur = nxt;
  }

#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int m = m0 + 16 * i + g + 8 * (e / 2);
      if (m >= M) continue;
      const float is = inv_s[m];
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        const int row = r0 + 8 * j + 2 * t + e % 2;
        if (row >= n) continue;
        float v = __fmul_rn(is, s[i][j][e]);
        if (bias) v = __fadd_rn(v, bias[row]);
        float* p = ep.y + static_cast<int64_t>(m) * ep.ldy + row;
        *p = ep.add ? __fadd_rn(*p, v) : v;
      }
    }
}

template <int TM, int NT>
void launch_grouped_mma(const uint32_t* w, const float* gs, const float* bias, int n, int np, int k, int kp,
                        const int8_t* xq, const float* inv_s, int M, const Epi& ep, cudaStream_t st) {
  constexpr int RPB = 4 * 8 * NT;
  const int G = (k + 127) / 128;
  launch(tc2_grouped_mma_kernel<TM, NT>, dim3((M + 16 * TM - 1) / (16 * TM), (np + RPB - 1) / RPB), dim3(128), 0,
         st, "group-scaled ternary GEMM (tensor cores)", w, gs, bias, n, np, kp / 16, G, xq, inv_s, M, kp, ep);
}

// The automatic tiles of a warp (cuda-bench --grouped-kernels swept them on the Qwen3-8B shapes, H100): from 128
// tokens the widest warp (2 token tiles x 4 row tiles), whose activation loads, sums and weight decoding serve 8 MMA
// tiles; below, the widest warp that still gives every SM kMinWarpsPerSm warps (2 token tiles only from 64 tokens,
// where both are full), since a warp walks all of K alone (the float sum's order) and the warps in flight, each with
// its next group's loads, are what hides the memory latency of few tokens.
constexpr int kMinWarpsPerSm = 16;
void auto_tiles(int np, int M, int& tm, int& nt) {
  tm = 2, nt = 4;
  if (M >= 128) return;
  const int64_t want = static_cast<int64_t>(kMinWarpsPerSm) * sm_count();
  for (int t : {2, 1}) {
    if (t == 2 && M < 64) continue;
    for (int r : {4, 2, 1}) {
      if (t == 1 && r == 1) break;
      const int64_t warps = static_cast<int64_t>((np + 8 * r - 1) / (8 * r)) * ((M + 16 * t - 1) / (16 * t));
      if (warps >= want) {
        tm = t, nt = r;
        return;
      }
    }
  }
  tm = 1, nt = 1;
}

}  // namespace

void ternary_grouped_matmul(const uint32_t* w, const float* group_scales, const float* bias, int n, int np, int k,
                            int kp, const int8_t* xq, const float* inv_s, int M, const TernaryEpilogue& ep,
                            cudaStream_t stream, int tile_a, int tile_b) {
  if (!w || !group_scales || !xq || !inv_s || !ep.y || n <= 0 || k <= 0 || M <= 0)
    check(cudaErrorInvalidValue, "ternary_grouped_matmul (null buffer or empty shape)");
  if (np < n || np % 16 != 0 || kp < k || kp % 64 != 0 || kp - k >= 64 || ep.ldy < n)
    check(cudaErrorInvalidValue, "ternary_grouped_matmul (bad padded shape)");
  const Epi e = make_epi(ep);
  // Automatic: the dp4a kernel up to 4 tokens, and up to 8 below kMmaRowsFrom5 weight rows; else the tensor-core
  // kernel (one 16-token tile at 5-8 tokens). On the 8B shapes (H100), a 16-token tile on the tensor cores against
  // 8 tokens by dp4a: gate_up 24576 x 4096 30.5 vs 76.2 us; o 4096 x 4096 18.9 vs 15.0, qkv 6144 x 4096 20.1 vs 20.5.
  const bool dp4a = tile_b == 0 && (tile_a != 0 ? M <= 8 : M <= 4 || (M <= 8 && np < kMmaRowsFrom5));
  const auto run_dp4a = [&](auto kernel_launch) {
    kernel_launch(w, group_scales, bias, n, np, k, kp, xq, inv_s, M, e, stream, tile_a);
  };
  if (dp4a) {
    if (M == 1) return run_dp4a(launch_grouped_dp4a<1>);
    if (M == 2) return run_dp4a(launch_grouped_dp4a<2>);
    if (M <= 4) return run_dp4a(launch_grouped_dp4a<4>);
    return run_dp4a(launch_grouped_dp4a<8>);
  }
  if (tile_b == 0 && tile_a != 0)
    check(cudaErrorInvalidValue, "ternary_grouped_matmul (groups per round: the dp4a kernel, up to 8 tokens)");
  int tm = tile_a, nt = tile_b;
  if (tm == 0 && nt == 0) auto_tiles(np, M, tm, nt);
  const auto run = [&](auto kernel_launch) {
    kernel_launch(w, group_scales, bias, n, np, k, kp, xq, inv_s, M, e, stream);
  };
  if (tm == 1 && nt == 1) return run(launch_grouped_mma<1, 1>);
  if (tm == 1 && nt == 2) return run(launch_grouped_mma<1, 2>);
  if (tm == 1 && nt == 4) return run(launch_grouped_mma<1, 4>);
  if (tm == 2 && nt == 1) return run(launch_grouped_mma<2, 1>);
  if (tm == 2 && nt == 2) return run(launch_grouped_mma<2, 2>);
  if (tm == 2 && nt == 4) return run(launch_grouped_mma<2, 4>);
  check(cudaErrorInvalidValue, "ternary_grouped_matmul (warp tiles: 1 or 2 token tiles x 1, 2 or 4 row tiles)");
}

}  // namespace tritium::cuda
