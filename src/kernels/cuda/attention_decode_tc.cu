// tritium kernels/cuda: GQA decode attention on the tensor cores, for bf16 KV pools (the GPU default).
//
// The same contract as the CUDA-core kernel of attention_decode.cu (kernels.h attention_decode_gqa / attention_gqa):
// grid (rows, KVH, ceil(nsplit / CPB)), row r's positions 0..pos[r] cut into attention_gqa_chunks(pos[r] + 1) chunks
// by its context alone, block z attending chunks z CPB .. z CPB + CPB - 1. A warp holds every query head of its KV
// head, so each K / V row is read once for all of them. A block of one warp attends its chunks one after another; a
// block of W = CPB warps (a few rows, so that they still spread over the SMs) gives each warp one of its chunks at
// once. The chunks' states are folded in chunk order by the online-softmax merge: as each ends, in a one-warp block
// holding all of them; by warp 0 from the states the warps left in shared memory, in a W-warp block holding all of
// them; or else by the last block to finish (a counter it resets) from the states the blocks wrote to the scratch.
//
// A tile of 32 positions' K and V rows is copied into shared memory (cp.async, rows padded to 2 D + 16 bytes so that
// the 8 rows of an ldmatrix phase fall in different banks; the next tile in flight while the current one is attended).
// Scores are S^T = K Q^T on mma.sync m16n8k16 (bf16 in, float accumulators): A = 16 positions x 16 dimensions of K
// (ldmatrix), B = 16 dimensions x 8 query heads of q (registers; the G = H / KVH <= 8 heads of the KV head, the rest
// zero). q is held as two bf16 parts, hi = bf16(q) and lo = bf16(q - hi), and both are multiplied, so the scores
// carry q to ~16 bits: the K / V elements are bf16 already, and their products are exact in the accumulators. Each
// lane holds the scores of 4 positions x 2 heads; the online softmax (base-2 exponentials, the scale folded in) takes
// one max over the tile per head (3 shuffles) and rescales the output once per tile. The weights P, split into hi
// and lo as q, are transposed in registers (movmatrix) into the B operand of O^T = V^T P^T (A = 16 dimensions x 16
// positions of V through ldmatrix.trans), whose float accumulators hold the lane's 2 heads x D / 4 dimensions.
// Per 32 positions and KV head: 2 D / 4 MMAs for the scores and as many for the output, against ~70 instructions per
// position and query head on the CUDA cores.
//
// FUSED (decode steps): RoPE of q and of the new k at pos[r] (rope_kv_write's float operations), the new k and v
// rounded to bf16 and written to the pools by the block holding the new position, which also places them in its
// last tile's shared memory instead of copying them back. Unfused (after rope_kv_write): q as rotated, the new
// position copied from the pool, which holds the same values: the same bits. Every operation of a chunk and of the
// merge depends on the chunk's positions only, so neither the batch nor CPB nor W changes a bit.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "kernels/cuda/attention_gqa.cuh"
#include "kernels/cuda/kernels.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/row_ops.cuh"

namespace tritium::cuda {
namespace {

constexpr int kTile = 32;  // positions per shared-memory tile: two m16 tiles of the MMAs

// Shared memory of one warp: two buffers of a tile's K and V rows, each row padded to 2 D + 16 bytes.
template <int D>
__host__ __device__ constexpr int warp_smem_bytes() {
  return 2 * 2 * kTile * (2 * D + 16);
}

// A chunk's state left in a warp's buffers for warp 0 to fold, lane-interleaved: entry k of lane l at float 32 k + l;
// entries 0-3 the maxima and sums of weights of heads h0 / h1 (m0, m1, l0, l1), then o[i][e] at 4 + 4 i + e.
__host__ __device__ constexpr int state_at(int k) { return 32 * k; }
template <int D>
__host__ __device__ constexpr int state_bytes() {
  return state_at(4 + 4 * (D / 16)) * 4;
}

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
// No memory clobber: the copies may be issued in any order with the loads around them (the wait below has one).
__device__ __forceinline__ void cp_async16(uint32_t smem, const void* gmem) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem), "l"(gmem));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
__device__ __forceinline__ void cp_async_wait1() { asm volatile("cp.async.wait_group 1;\n" ::: "memory"); }

// Four 8 x 8 b16 matrices; lane i gives the address of row i % 8 of matrix i / 8. Volatile: kept in order with the
// copies and their wait.
__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldsm_x4_trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
// The transpose of an 8 x 8 b16 matrix held one row pair per lane (lane l: row l / 4, columns 2 (l % 4), + 1).
__device__ __forceinline__ uint32_t movmatrix_trans(uint32_t x) {
  uint32_t y;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(y) : "r"(x));
  return y;
}
// d (16 x 8, float) += a (16 x 16, bf16, row major) * b (16 x 8, bf16, column major). Not volatile: registers only,
// so independent MMAs may be interleaved.
__device__ __forceinline__ void mma_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ uint32_t bits(__nv_bfloat162 v) { return *reinterpret_cast<const uint32_t*>(&v); }
// x and y (x in the low half) as hi = bf16 pairs and lo = the bf16 of what hi leaves out.
__device__ __forceinline__ void split_bf16(float x, float y, uint32_t& hi, uint32_t& lo) {
  const __nv_bfloat162 h = __floats2bfloat162_rn(x, y);
  const float2 hf = __bfloat1622float2(h);
  hi = bits(h);
  lo = bits(__floats2bfloat162_rn(__fsub_rn(x, hf.x), __fsub_rn(y, hf.y)));
}

template <int D, bool FUSED>
__global__ void __launch_bounds__(32 * kGqaTcMaxWarps) attention_gqa_tc_kernel(
    const float* __restrict__ qkv, int64_t ldq, int H, int KVH, const float* __restrict__ cos_t,
    const float* __restrict__ sin_t, const int32_t* __restrict__ pos, const int32_t* __restrict__ seq,
    const int32_t* __restrict__ bt, int btw, int bs, __nv_bfloat16* __restrict__ kpool,
    __nv_bfloat16* __restrict__ vpool, float* __restrict__ out, float sl2, const int32_t* __restrict__ row_list,
    float* __restrict__ part, int* __restrict__ cnt, int cpb, PendingSums sums) {
  constexpr int T = kTile, KS = D / 16, RB = 2 * D + 16, PR = D / 8, NP = D / 64;
  static_assert(D % 64 == 0, "head_dim must be a multiple of 64");
  static_assert(warp_smem_bytes<D>() == 2 * 2 * T * RB, "the launcher's shared memory");
  static_assert(state_bytes<D>() <= warp_smem_bytes<D>(), "a chunk's state fits the warp's buffers");
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ int last_block;
  const int warp = static_cast<int>(threadIdx.x) >> 5, W = static_cast<int>(blockDim.x) >> 5;
  // The warp's buffers: tiles[buffer][K, V][position][D bf16 + 16 bytes].
  auto tiles = reinterpret_cast<unsigned char (*)[2][T * RB]>(smem + warp * warp_smem_bytes<D>());
  const int G = H / KVH, kvd = KVH * D, kvh = blockIdx.y, z = blockIdx.z;
  const int r = row_list ? row_list[blockIdx.x] : blockIdx.x;
  const int lane = static_cast<int>(threadIdx.x) & 31, g = lane >> 2, t = lane & 3;
  // Metadata is not written by kernels: read before waiting for the previous kernel.
  const int p_new = pos[r], n_all = p_new + 1;
  const int chunk = gqa_chunk(n_all), active = (n_all + chunk - 1) / chunk;
  const int nblk = (active + cpb - 1) / cpb;
  if (z >= nblk) {
    pdl_trigger();
    return;
  }
  // The block's chunks are b_begin .. b_end - 1; the warp's c_begin .. c_end - 1 (all of them, or the warp's one: none
  // for the warps past the row's last chunk), the pool positions p_lo .. p_hi - 1, the new one included (chunks are
  // multiples of the tile, so a tile never spans two chunks, and only the row's last tile can be short).
  const int b_begin = z * cpb, b_end = min(active, b_begin + cpb);
  const int c_begin = W == 1 ? b_begin : b_begin + warp, c_end = W == 1 ? b_end : min(b_end, c_begin + 1);
  const bool idle = c_begin >= c_end;
  const int p_lo = c_begin * chunk, p_hi = min(n_all, c_end * chunk);
  const bool has_new = !idle && c_end == active;
  const int32_t* table = bt + static_cast<int64_t>(seq[r]) * btw;
  const int64_t new_off = (static_cast<int64_t>(table[p_new / bs]) * bs + p_new % bs) * kvd + kvh * D;
  // Lanes 2 i and 2 i + 1 copy rows i and i + 16 of a tile, the even and the odd 16-byte pieces (so each copy
  // instruction reads whole 32-byte sectors); their pool blocks are loaded a tile ahead (the first before the wait).
  const int crow = lane >> 1, cpar = lane & 1;
  int blk_next[2];
  auto blocks_of = [&](int tb) {
#pragma unroll
    for (int u = 0; u < 2; ++u) blk_next[u] = table[min(tb + crow + 16 * u, p_hi - 1) / bs];
  };
  if (!idle) blocks_of(p_lo);
  // Lane (g, t) holds q of query head g of the KV head (the B operand's column g) at dimensions 16 kk + 2 t + {0, 1,
  // 8, 9}; the RoPE partner of a dimension below D / 2 is the same slot of k-step kk + KS / 2.
  float qcs[FUSED ? KS / 2 : 1][4], qsn[FUSED ? KS / 2 : 1][4], kcs[NP], ksn[NP];
  if constexpr (FUSED) {
    const float* cb = cos_t + static_cast<int64_t>(p_new) * (D / 2);
    const float* sb = sin_t + static_cast<int64_t>(p_new) * (D / 2);
#pragma unroll
    for (int kk = 0; kk < KS / 2; ++kk) {
      const int d = 16 * kk + 2 * t;
      qcs[kk][0] = cb[d], qcs[kk][1] = cb[d + 1], qcs[kk][2] = cb[d + 8], qcs[kk][3] = cb[d + 9];
      qsn[kk][0] = sb[d], qsn[kk][1] = sb[d + 1], qsn[kk][2] = sb[d + 8], qsn[kk][3] = sb[d + 9];
    }
#pragma unroll
    for (int i = 0; i < NP; ++i) kcs[i] = cb[lane * NP + i], ksn[i] = sb[lane * NP + i];
  }
  pdl_trigger();
  pdl_wait();
  // Copies the K and V rows of the tile at tb into buffer b (one commit group); rows past the tile's end are zeroed
  // (a zero weight times stale shared memory could be NaN). The fused kernel's new position is not copied: place_new
  // writes it. The first tile's copies start before q is loaded.
  auto copy_tile = [&](int tb, int b) {
    const int n = min(T, p_hi - tb);
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      const int j = crow + 16 * u, p = tb + j;
      unsigned char* kd = tiles[b][0] + j * RB + 16 * cpar;
      unsigned char* vd = tiles[b][1] + j * RB + 16 * cpar;
      if (j >= n) {
#pragma unroll
        for (int c = 0; c < PR / 2; ++c) {
          *reinterpret_cast<uint4*>(kd + 32 * c) = make_uint4(0, 0, 0, 0);
          *reinterpret_cast<uint4*>(vd + 32 * c) = make_uint4(0, 0, 0, 0);
        }
      } else if (!FUSED || p != p_new) {  // the new position (fused): place_new
        const int64_t off = (static_cast<int64_t>(blk_next[u]) * bs + p % bs) * kvd + kvh * D;
        const unsigned char* ks = reinterpret_cast<const unsigned char*>(kpool + off) + 16 * cpar;
        const unsigned char* vs = reinterpret_cast<const unsigned char*>(vpool + off) + 16 * cpar;
        const uint32_t ka = smem_u32(kd), va = smem_u32(vd);
#pragma unroll
        for (int c = 0; c < PR / 2; ++c) cp_async16(ka + 32 * c, ks + 32 * c);
#pragma unroll
        for (int c = 0; c < PR / 2; ++c) cp_async16(va + 32 * c, vs + 32 * c);
      }
    }
    if (tb + T < p_hi) blocks_of(tb + T);
    cp_async_commit();
  };
  if (!idle) copy_tile(p_lo, 0);
  const float* row = qkv + static_cast<int64_t>(r) * ldq;
  const SumsRow sr{FUSED && sums.acc ? sums.acc + static_cast<int64_t>(r) * sums.ldacc : nullptr,
                   FUSED && sums.acc ? sums.inv_s[r] : 0.0f,
                   sums.ep.seg_end[0],
                   sums.ep.seg_end[1],
                   sums.ep.seg_scale[0],
                   sums.ep.seg_scale[1],
                   sums.ep.seg_scale[2]};
  // Column c of the row: the floats of qkv, or (fused) the qkv projection's pending int8-GEMM sums through its
  // epilogue (the same value bit for bit).
  auto col = [&](int c) -> float { return FUSED && sr.acc ? sr.value(c, sr.acc[c]) : __ldcg(row + c); };
  auto rope = [](float& x1, float& x2, float c, float s) {
    const float a = x1, b = x2;
    x1 = __fsub_rn(__fmul_rn(a, c), __fmul_rn(b, s));
    x2 = __fadd_rn(__fmul_rn(b, c), __fmul_rn(a, s));
  };
  uint32_t qh[KS][2], ql[KS][2];
  {
    float qf[KS][4];
    const int h = kvh * G + g;
    if (g >= G) {
#pragma unroll
      for (int kk = 0; kk < KS; ++kk) qf[kk][0] = qf[kk][1] = qf[kk][2] = qf[kk][3] = 0.0f;
    } else if (FUSED && sr.acc) {
#pragma unroll
      for (int kk = 0; kk < KS; ++kk) {
        const int d = h * D + 16 * kk + 2 * t;
        qf[kk][0] = sr.value(d, sr.acc[d]), qf[kk][1] = sr.value(d + 1, sr.acc[d + 1]);
        qf[kk][2] = sr.value(d + 8, sr.acc[d + 8]), qf[kk][3] = sr.value(d + 9, sr.acc[d + 9]);
      }
    } else {
#pragma unroll
      for (int kk = 0; kk < KS; ++kk) {
        const float2 a = __ldcg(reinterpret_cast<const float2*>(row + h * D + 16 * kk + 2 * t));
        const float2 b = __ldcg(reinterpret_cast<const float2*>(row + h * D + 16 * kk + 8 + 2 * t));
        qf[kk][0] = a.x, qf[kk][1] = a.y, qf[kk][2] = b.x, qf[kk][3] = b.y;
      }
    }
    if constexpr (FUSED) {
#pragma unroll
      for (int kk = 0; kk < KS / 2; ++kk)
#pragma unroll
        for (int e = 0; e < 4; ++e) rope(qf[kk][e], qf[kk + KS / 2][e], qcs[kk][e], qsn[kk][e]);
    }
#pragma unroll
    for (int kk = 0; kk < KS; ++kk) {
      split_bf16(qf[kk][0], qf[kk][1], qh[kk][0], ql[kk][0]);
      split_bf16(qf[kk][2], qf[kk][3], qh[kk][1], ql[kk][1]);
    }
  }
  // The new position's k and v (fused, the block holding it): lane dimensions lane NP + i and D / 2 + lane NP + i.
  __nv_bfloat16 kn[2 * NP], vn[2 * NP];
  if (FUSED && has_new) {
#pragma unroll
    for (int i = 0; i < NP; ++i) {
      const int d = lane * NP + i, kc = H * D + kvh * D + d, vc = H * D + kvd + kvh * D + d;
      float k1 = col(kc), k2 = col(kc + D / 2);
      if constexpr (FUSED) rope(k1, k2, kcs[i], ksn[i]);
      kn[i] = __float2bfloat16_rn(k1), kn[NP + i] = __float2bfloat16_rn(k2);
      vn[i] = __float2bfloat16_rn(col(vc)), vn[NP + i] = __float2bfloat16_rn(col(vc + D / 2));
      kpool[new_off + d] = kn[i], kpool[new_off + D / 2 + d] = kn[NP + i];
      vpool[new_off + d] = vn[i], vpool[new_off + D / 2 + d] = vn[NP + i];
    }
  }
  // The fused kernel's new position (the last of the row) into the tile at tb held in buffer b.
  auto place_new = [&](int tb, int b) {
    if (!FUSED || p_new < tb || p_new >= tb + T) return;
    __nv_bfloat16* kr = reinterpret_cast<__nv_bfloat16*>(tiles[b][0] + (p_new - tb) * RB);
    __nv_bfloat16* vr = reinterpret_cast<__nv_bfloat16*>(tiles[b][1] + (p_new - tb) * RB);
#pragma unroll
    for (int i = 0; i < NP; ++i) {
      kr[lane * NP + i] = kn[i], kr[D / 2 + lane * NP + i] = kn[NP + i];
      vr[lane * NP + i] = vn[i], vr[D / 2 + lane * NP + i] = vn[NP + i];
    }
  };
  place_new(p_lo, 0);
  // ldmatrix rows: K as A (matrix m: positions m % 2 * 8 .., dimensions m / 2 * 8 ..), V as A^T (matrix m: positions
  // m / 2 * 8 .., dimensions m % 2 * 8 ..).
  const int ka_pos = (lane & 7) + ((lane >> 3) & 1) * 8, ka_dim = (lane >> 4) * 8;
  const int va_pos = (lane & 7) + (lane >> 4) * 8, va_dim = ((lane >> 3) & 1) * 8;
  const int h0 = kvh * G + 2 * t, h1 = h0 + 1;  // the heads of the lane's accumulator columns
  const bool w0 = 2 * t < G, w1 = 2 * t + 1 < G;
  // The row's result is the left fold, in chunk order, of the chunks' states (max, sum of weights, weighted V sum)
  // into (M, L, OM) by the online-softmax merge: a block holding all of the row's chunks folds each as it ends; else
  // each block writes its chunks' states and the last to finish folds them all from there, with the same operations.
  float M0 = -INFINITY, M1 = -INFINITY, L0 = 0.0f, L1 = 0.0f, OM[KS][4];
#pragma unroll
  for (int i = 0; i < KS; ++i) OM[i][0] = OM[i][1] = OM[i][2] = OM[i][3] = 0.0f;
  auto fold = [&](float cm0, float cm1, float cl0, float cl1, const float (&co)[KS][4]) {
    const float n0 = fmaxf(M0, cm0), n1 = fmaxf(M1, cm1);
    const float a0 = exp2f(__fsub_rn(M0, n0)), b0 = exp2f(__fsub_rn(cm0, n0));
    const float a1 = exp2f(__fsub_rn(M1, n1)), b1 = exp2f(__fsub_rn(cm1, n1));
    L0 = __fmaf_rn(L0, a0, __fmul_rn(cl0, b0)), L1 = __fmaf_rn(L1, a1, __fmul_rn(cl1, b1));
#pragma unroll
    for (int i = 0; i < KS; ++i) {
      OM[i][0] = __fmaf_rn(OM[i][0], a0, __fmul_rn(co[i][0], b0));
      OM[i][1] = __fmaf_rn(OM[i][1], a1, __fmul_rn(co[i][1], b1));
      OM[i][2] = __fmaf_rn(OM[i][2], a0, __fmul_rn(co[i][2], b0));
      OM[i][3] = __fmaf_rn(OM[i][3], a1, __fmul_rn(co[i][3], b1));
    }
    M0 = n0, M1 = n1;
  };
  // Chunk c's state of heads h0 / h1 in the scratch: O [D], max, sum.
  auto chunk_state = [&](int h, int c) {
    return part + ((static_cast<int64_t>(blockIdx.x) * H + h) * kAttentionMaxSplit + c) * (D + 2);
  };
  int tb = p_lo, it = 0;
  for (int c = c_begin; c < c_end; ++c) {
    const int ce = min(p_hi, (c + 1) * chunk);
    // Running max (base 2, scaled) and the lane's part of the sum of weights of heads h0 / h1; the output O^T[d][h]:
    // o[i][0] (d = 16 i + g, h0), [1] (d, h1), [2] (d + 8, h0), [3] (d + 8, h1).
    float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f, o[KS][4];
#pragma unroll
    for (int i = 0; i < KS; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
    for (; tb < ce; ++it) {
      const int n = min(T, p_hi - tb), nx = tb + n;
      if (nx < p_hi) {
        copy_tile(nx, (it + 1) & 1);
        place_new(nx, (it + 1) & 1);
      } else {
        cp_async_commit();  // an empty group, so that wait_group 1 always means "tile it has landed"
      }
      cp_async_wait1();
      __syncwarp();
      const uint32_t kt = smem_u32(tiles[it & 1][0]), vt = smem_u32(tiles[it & 1][1]);
      const int mtiles = n > 16 ? 2 : 1;
      // Scores of positions 16 mt + g (+ 8) for heads h0 / h1: s[mt][0] (g, h0), [1] (g, h1), [2] (g + 8, h0), [3].
      // (q's hi and lo parts in separate accumulators: four independent chains of MMAs.)
      float s[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
      float sl[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) {
        if (mt >= mtiles) break;
#pragma unroll
        for (int kk = 0; kk < KS; ++kk) {
          uint32_t a[4];
          ldsm_x4(a, kt + (16 * mt + ka_pos) * RB + (16 * kk + ka_dim) * 2);
          mma_bf16(s[mt], a, qh[kk][0], qh[kk][1]);
          mma_bf16(sl[mt], a, ql[kk][0], ql[kk][1]);
        }
      }
#pragma unroll
      for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[mt][e] = __fadd_rn(s[mt][e], sl[mt][e]);
      float x0 = -INFINITY, x1 = -INFINITY;
#pragma unroll
      for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int j = 16 * mt + g + (e >> 1) * 8;
          s[mt][e] = j < n ? __fmul_rn(s[mt][e], sl2) : -INFINITY;
          if (e & 1) {
            x1 = fmaxf(x1, s[mt][e]);
          } else {
            x0 = fmaxf(x0, s[mt][e]);
          }
        }
#pragma unroll
      for (int off = 4; off <= 16; off *= 2) {
        x0 = fmaxf(x0, __shfl_xor_sync(0xffffffffu, x0, off));
        x1 = fmaxf(x1, __shfl_xor_sync(0xffffffffu, x1, off));
      }
      // The tile has a position, so the new maxima are finite; exp2(-inf) = 0 for the first tile and masked rows.
      const float n0 = fmaxf(m0, x0), n1 = fmaxf(m1, x1);
      const float c0 = exp2f(__fsub_rn(m0, n0)), c1 = exp2f(__fsub_rn(m1, n1));
      m0 = n0, m1 = n1;
      float ps0 = 0.0f, ps1 = 0.0f;
#pragma unroll
      for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          s[mt][e] = exp2f(__fsub_rn(s[mt][e], (e & 1) ? n1 : n0));
          if (e & 1) {
            ps1 = __fadd_rn(ps1, s[mt][e]);
          } else {
            ps0 = __fadd_rn(ps0, s[mt][e]);
          }
        }
      l0 = __fmaf_rn(l0, c0, ps0), l1 = __fmaf_rn(l1, c1, ps1);
#pragma unroll
      for (int i = 0; i < KS; ++i) {
        o[i][0] = __fmul_rn(o[i][0], c0), o[i][1] = __fmul_rn(o[i][1], c1);
        o[i][2] = __fmul_rn(o[i][2], c0), o[i][3] = __fmul_rn(o[i][3], c1);
      }
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) {
        if (mt >= mtiles) break;
        // The weights of positions 16 mt .. + 15 as the B operand (positions x heads): lane (g, t) holds positions
        // g and g + 8 of heads 2 t, 2 t + 1; the transpose gives it positions 2 t, 2 t + 1 (+ 8) of head g.
        uint32_t ph0, pl0, ph1, pl1;
        split_bf16(s[mt][0], s[mt][1], ph0, pl0);
        split_bf16(s[mt][2], s[mt][3], ph1, pl1);
        ph0 = movmatrix_trans(ph0), pl0 = movmatrix_trans(pl0);
        ph1 = movmatrix_trans(ph1), pl1 = movmatrix_trans(pl1);
#pragma unroll
        for (int i = 0; i < KS; ++i) {
          uint32_t a[4];
          ldsm_x4_trans(a, vt + (16 * mt + va_pos) * RB + (16 * i + va_dim) * 2);
          mma_bf16(o[i], a, ph0, ph1);
          mma_bf16(o[i], a, pl0, pl1);
        }
      }
      __syncwarp();  // buffer it & 1 is free for tile it + 2
      tb = nx;
    }
#pragma unroll
    for (int off = 4; off <= 16; off *= 2) {
      l0 = __fadd_rn(l0, __shfl_xor_sync(0xffffffffu, l0, off));
      l1 = __fadd_rn(l1, __shfl_xor_sync(0xffffffffu, l1, off));
    }
    if (nblk == 1 && W == 1) {
      fold(m0, m1, l0, l1, o);
      continue;
    }
    if (nblk == 1) {  // the warp's only chunk, into its buffers (every copy has landed): warp 0 folds them below
      float* st = reinterpret_cast<float*>(tiles[0][0]) + lane;
      st[state_at(0)] = m0, st[state_at(1)] = m1, st[state_at(2)] = l0, st[state_at(3)] = l1;
#pragma unroll
      for (int i = 0; i < KS; ++i)
#pragma unroll
        for (int e = 0; e < 4; ++e) st[state_at(4 + 4 * i + e)] = o[i][e];
      continue;
    }
    float* p0 = chunk_state(h0, c);
    float* p1 = chunk_state(h1, c);
#pragma unroll
    for (int i = 0; i < KS; ++i) {
      const int d = 16 * i + g;
      if (w0) p0[d] = o[i][0], p0[d + 8] = o[i][2];
      if (w1) p1[d] = o[i][1], p1[d + 8] = o[i][3];
    }
    if (g == 0 && w0) p0[D] = m0, p0[D + 1] = l0;
    if (g == 0 && w1) p1[D] = m1, p1[D + 1] = l1;
  }
  const int64_t ck = static_cast<int64_t>(blockIdx.x) * KVH + kvh;
  if (nblk == 1 && W > 1) {
    __syncthreads();
    if (warp != 0) return;
    // The block's chunks in chunk order (heads past G fold whatever their warps computed and are not written).
    for (int w = 0; w < b_end - b_begin; ++w) {
      const float* st = reinterpret_cast<const float*>(smem + w * warp_smem_bytes<D>()) + lane;
      float co[KS][4];
#pragma unroll
      for (int i = 0; i < KS; ++i)
#pragma unroll
        for (int e = 0; e < 4; ++e) co[i][e] = st[state_at(4 + 4 * i + e)];
      fold(st[state_at(0)], st[state_at(1)], st[state_at(2)], st[state_at(3)], co);
    }
  }
  if (nblk > 1) {
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) last_block = atomicAdd(&cnt[ck], 1) == nblk - 1;
    __syncthreads();
    if (!last_block || warp != 0) return;
    __threadfence();
    // The last block: every chunk's state, 4 chunks' loads in flight at a time (heads past G read as zeros).
    for (int j0 = 0; j0 < active; j0 += 4) {
      float cm[4][2], cl[4][2], co[4][KS][4];
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const bool v0 = w0 && j0 + u < active, v1 = w1 && j0 + u < active;
        const float* q0 = chunk_state(v0 ? h0 : 0, v0 ? j0 + u : 0);
        const float* q1 = chunk_state(v1 ? h1 : 0, v1 ? j0 + u : 0);
        cm[u][0] = v0 ? __ldcg(q0 + D) : 0.0f, cl[u][0] = v0 ? __ldcg(q0 + D + 1) : 1.0f;
        cm[u][1] = v1 ? __ldcg(q1 + D) : 0.0f, cl[u][1] = v1 ? __ldcg(q1 + D + 1) : 1.0f;
#pragma unroll
        for (int i = 0; i < KS; ++i) {
          const int d = 16 * i + g;
          co[u][i][0] = v0 ? __ldcg(q0 + d) : 0.0f, co[u][i][2] = v0 ? __ldcg(q0 + d + 8) : 0.0f;
          co[u][i][1] = v1 ? __ldcg(q1 + d) : 0.0f, co[u][i][3] = v1 ? __ldcg(q1 + d + 8) : 0.0f;
        }
      }
#pragma unroll
      for (int u = 0; u < 4; ++u)
        if (j0 + u < active) fold(cm[u][0], cm[u][1], cl[u][0], cl[u][1], co[u]);
    }
    if (lane == 0) cnt[ck] = 0;  // ready for the next launch (graph replay)
  }
  // Divided by the sum of weights through its reciprocal: 2 divisions per lane instead of 4 KS.
  float* ob = out + static_cast<int64_t>(r) * H * D;
  const float i0 = __frcp_rn(L0), i1 = __frcp_rn(L1);
#pragma unroll
  for (int i = 0; i < KS; ++i) {
    const int d = 16 * i + g;
    if (w0) ob[h0 * D + d] = __fmul_rn(OM[i][0], i0), ob[h0 * D + d + 8] = __fmul_rn(OM[i][2], i0);
    if (w1) ob[h1 * D + d] = __fmul_rn(OM[i][1], i1), ob[h1 * D + d + 8] = __fmul_rn(OM[i][3], i1);
  }
}

template <int D, bool FUSED>
void launch_tc(const float* qkv, int64_t ldq, int rows, int H, int KVH, const float* cos_t, const float* sin_t,
               const int32_t* pos, const int32_t* seq, const int32_t* bt, int btw, int bs, __nv_bfloat16* k,
               __nv_bfloat16* v, float* out, int nsplit, const int32_t* row_list, float* part, int32_t* cnt,
               cudaStream_t stream, int cpb, int warps, const PendingSums& sums) {
  static const bool sized = [] {  // more than the default 48 KB of shared memory per block, once per kernel
    check(cudaFuncSetAttribute(attention_gqa_tc_kernel<D, FUSED>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               kGqaTcMaxWarps * warp_smem_bytes<D>()),
          "attention_gqa (tensor cores): shared memory");
    return true;
  }();
  (void)sized;
  const float sl2 = static_cast<float>(1.4426950408889634 / std::sqrt(static_cast<double>(D)));  // log2(e) / sqrt(D)
  const dim3 grid(rows, KVH, (nsplit + cpb - 1) / cpb);
  launch(attention_gqa_tc_kernel<D, FUSED>, grid, dim3(32 * warps), static_cast<size_t>(warps) * warp_smem_bytes<D>(),
         stream,
         FUSED ? "attention_decode_gqa (tensor cores)" : "attention_gqa (tensor cores)", qkv, ldq, H, KVH, cos_t,
         sin_t, pos, seq, bt, btw, bs, k, v, out, sl2, row_list, part, cnt, cpb, sums);
}

}  // namespace

GqaTcSplit attention_gqa_tc_split(int rows, int KVH, int nsplit) {
  // A few rows of 2..kGqaTcMaxWarps chunks: while a block per (row, KV head) leaves SMs idle, the row's chunks run at
  // once, a warp each, and the block folds them from shared memory instead of the scratch. (Rows of more chunks need
  // the scratch either way, and one-warp blocks of one chunk are then faster.) Else a block is one warp, which folds
  // its own chunks as they end, so fewer, longer blocks save the scratch round trips of the merge but attend their
  // tiles one after another: double the chunks per block, the last step up to all of the row's chunks (a row of 6
  // chunks as blocks of 4 and 2 would pay the scratch merge and wait on the longer block), while the grid keeps two
  // warps per SM; one block for a row of at most two chunks. Measured on the H200 at 1-256 rows x contexts 64-1024
  // (bench/CUDA_NOTES.md).
  nsplit = std::max(nsplit, 1);
  const int64_t warps = static_cast<int64_t>(std::max(rows, 0)) * std::max(KVH, 1);
  if (nsplit > 1 && nsplit <= kGqaTcMaxWarps && warps <= sm_count()) return {nsplit, nsplit};
  if (nsplit <= 2) return {nsplit, 1};
  int c = 1;
  while (c < nsplit) {
    const int next = std::min(2 * c, nsplit);
    if (warps * ((nsplit + next - 1) / next) < 2LL * sm_count()) break;
    c = next;
  }
  return {c, 1};
}

void attention_gqa_tc(bool fused, const float* qkv, int64_t ldq, int rows, int H, int KVH, int D, const float* cos_t,
                      const float* sin_t, const int32_t* pos, const int32_t* seq, const int32_t* block_tables,
                      int bt_width, int block_size, __nv_bfloat16* k_pool, __nv_bfloat16* v_pool, float* out,
                      int nsplit, const int32_t* row_list, float* part, int32_t* cnt, cudaStream_t stream, int cpb,
                      int warps, const PendingSums& sums) {
  if (cpb == 0 && warps == 0) {
    const GqaTcSplit s = attention_gqa_tc_split(rows, KVH, nsplit);
    cpb = s.chunks, warps = s.warps;
  } else if (warps == 0) {
    warps = 1;
  } else if (cpb == 0) {
    cpb = warps;
  }
  if (warps < 1 || warps > kGqaTcMaxWarps || (warps > 1 && warps != cpb))
    check(cudaErrorInvalidValue, "attention_gqa (warps per block: 1, or the chunks per block up to 4)");
  auto go = [&](auto d, auto f) {
    launch_tc<decltype(d)::value, decltype(f)::value>(qkv, ldq, rows, H, KVH, cos_t, sin_t, pos, seq, block_tables,
                                                      bt_width, block_size, k_pool, v_pool, out, nsplit, row_list,
                                                      part, cnt, stream, cpb, warps, sums);
  };
  using F = std::true_type;
  using U = std::false_type;
  if (D == 64) {
    fused ? go(std::integral_constant<int, 64>{}, F{}) : go(std::integral_constant<int, 64>{}, U{});
  } else if (D == 128) {
    fused ? go(std::integral_constant<int, 128>{}, F{}) : go(std::integral_constant<int, 128>{}, U{});
  } else {
    check(cudaErrorInvalidValue, "attention_gqa (head_dim must be 64 or 128)");
  }
}

}  // namespace tritium::cuda
