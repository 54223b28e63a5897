// tritium kernels/cuda: GQA decode attention over bf16 KV pools on the tensor cores (mma.sync m16n8k16 bf16 with
// float accumulation, sm_80+), the chunking and the results' contract of attention_decode.cu.
//
// Grid (rows, KVH, ceil(nsplit / CPB)), kGqaMmaWarps warps per block. Row r's positions are cut into the chunks of
// attention_gqa_chunks (a function of the context only) and block z attends chunks z CPB .. z CPB + CPB - 1 one
// after another, as in attention_decode.cu. All G = H / KVH query heads of the KV head are the rows of one MMA
// tile (G <= 8 of its 16 rows; the rest are zero): per 16 positions a warp runs D / 8 MMAs for the scores Q K^T
// and D / 8 for P V, where the CUDA-core kernel spends ~67 instructions per head and position.
//
// The block copies the K and V rows of kGqaMmaWarps x 16 positions at a time into shared memory (cp.async, the next
// tile in flight while the current one is attended; 16-byte pieces XOR-swizzled by the row, so that ldmatrix reads
// 8 rows without bank conflicts; V rows past a tile's end are zeroed). Warp w attends positions 16 w .. 16 w + 15
// of each tile with its own online-softmax state per head (running max in log2 units, sum of exponentials, P V in
// the MMA accumulators): K fragments by ldmatrix, V fragments by ldmatrix.trans, the probabilities rounded to bf16
// as the A operand (the accumulator layout of Q K^T is the A layout of P V, as in FlashAttention-2). q is rounded
// to bf16 once per block; scores, softmax, sums and the merges are float. At the end of a chunk the warps' states
// are merged in warp order through shared memory; one chunk: the block writes the output; several: each chunk's
// state goes to the scratch and the block holding all of the row's chunks, or else the last block of the (row, KV
// head) to finish (an atomic counter it resets, so graphs replay), merges them in chunk order. Each chunk's
// operations and the merges are the same whatever CPB is, so CPB and the batch never change a bit.
//
// The new position pos[r] opens warp 0's state of the last chunk: its score q . k in float (q before the bf16
// rounding) and its v with weight 1. FUSED (decode steps): RoPE of q and of the new k at pos[r] from the tables
// (rope_kv_write's float operations), k and v rounded to bf16 and written to the pool by the block of the last
// chunk. Unfused (single-token rows of steps that also prefill, after rope_kv_write): q read as rotated and the
// new k and v from the pool, which holds the same rounded values: the same result bit for bit.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <atomic>
#include <cmath>
#include <cstdint>

#include "kernels/cuda/attention_gqa.cuh"
#include "kernels/cuda/kernels.h"
#include "kernels/cuda/launch.cuh"

namespace tritium::cuda {
namespace {

constexpr int kWarps = kGqaMmaWarps, kTile = 16 * kWarps, kStages = 2;

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);  // .x (low half) = lo
  return *reinterpret_cast<const uint32_t*>(&v);
}

// Four 8 x 8 matrices of 16-bit elements; lanes 8 i .. 8 i + 7 give the row addresses of matrix i.
__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
}
__device__ __forceinline__ void ldsm_x4_trans(uint32_t (&r)[4], unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
}
// c += A B: A 16 x 16 bf16 (rows g and g + 8 of lane g * 4 + t: a0 / a2 row g, a1 / a3 row g + 8; a1 = a3 = 0 here),
// B 16 x 8 bf16, c 16 x 8 float (c0, c1 row g, columns 2t, 2t + 1; c2, c3 row g + 8).
__device__ __forceinline__ void mma_bf16(float (&c)[4], uint32_t a0, uint32_t a2, uint32_t b0, uint32_t b1) {
  const uint32_t z = 0;
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(z), "r"(a2), "r"(z), "r"(b0), "r"(b1));
}

template <int D, int NS>
constexpr size_t mma_smem_bytes() {
  return static_cast<size_t>(NS) * 2 * kTile * D * 2 + 8 * D * sizeof(float);
}

template <int D, bool FUSED, int NS>
__global__ void __launch_bounds__(32 * kWarps) attention_gqa_mma_kernel(
    const float* __restrict__ qkv, int64_t ldq, int H, int KVH, const float* __restrict__ cos_t,
    const float* __restrict__ sin_t, const int32_t* __restrict__ pos, const int32_t* __restrict__ seq,
    const int32_t* __restrict__ bt, int btw, int bs, __nv_bfloat16* __restrict__ kpool,
    __nv_bfloat16* __restrict__ vpool, float* __restrict__ out, float scale2, const int32_t* __restrict__ row_list,
    float* __restrict__ part, int* __restrict__ cnt, int cpb) {
  constexpr int T = kTile, W = kWarps, RB = D * 2, PR = RB / 16, KS = D / 16, NT = D / 8, HD = D / 2;
  static_assert(PR >= 8 && KS % 2 == 0 && W == 2, "head_dim 64 or 128; warp 1's state is merged into warp 0's");
  extern __shared__ __align__(16) unsigned char smem[];
  unsigned char* tiles = smem;                                           // [stage][K, V][position][D bf16, swizzled]
  float* st_o = reinterpret_cast<float*>(smem + NS * 2 * T * RB);      // warp 1's P V at the end of a chunk [8][D]
  __shared__ float st_m[8], st_l[8];
  __shared__ int is_last;
  const int G = H / KVH, kvd = KVH * D, kvh = blockIdx.y, z = blockIdx.z;
  const int r = row_list ? row_list[blockIdx.x] : blockIdx.x;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  // Metadata is not written by kernels: read before waiting for the previous kernel.
  const int p_new = pos[r], n_all = p_new + 1;
  const int chunk = gqa_chunk(n_all), active = (n_all + chunk - 1) / chunk;
  const int nblk = (active + cpb - 1) / cpb;
  if (z >= nblk) {
    pdl_trigger();
    return;
  }
  const int c_begin = z * cpb, c_end = min(active, c_begin + cpb);
  const int p_lo = c_begin * chunk, p_hi = min(p_new, c_end * chunk);
  const bool has_new = c_end == active;
  // Positions of the tile starting at tb: at most T, never past the end of tb's chunk.
  auto tile_len = [&](int tb) { return min(T, min(p_hi, (tb / chunk + 1) * chunk) - tb); };
  const int32_t* table = bt + static_cast<int64_t>(seq[r]) * btw;
  const int64_t new_off = (static_cast<int64_t>(table[p_new / bs]) * bs + p_new % bs) * kvd + kvh * D;
  // Thread i copies piece i % PR of rows i / PR + k RSTEP of a tile. The pool blocks of those rows are read one tile
  // ahead (blk), so that a tile's copies never wait for a block-table read.
  constexpr int RSTEP = 32 * W / PR, RPT = T / RSTEP;
  const int piece = threadIdx.x % PR, row0 = threadIdx.x / PR;
  int blk[RPT];
  auto fetch_blocks = [&](int tb) {
    const int n = tile_len(tb);
#pragma unroll
    for (int k = 0; k < RPT; ++k) {
      const int j = row0 + k * RSTEP;
      blk[k] = j < n ? table[(tb + j) / bs] : 0;
    }
  };
  // Copies the K and V rows of the tile at tb into stage s (one commit group); V rows past its end are zeroed, so
  // that their zero weights never meet a stale NaN.
  auto copy_tile = [&](int tb, int s) {
    const int n = tile_len(tb);
    unsigned char* kt = tiles + s * 2 * T * RB;
    unsigned char* vt = kt + T * RB;
#pragma unroll
    for (int k = 0; k < RPT; ++k) {
      const int j = row0 + k * RSTEP, at = j * RB + 16 * (piece ^ (j & 7));
      if (j < n) {
        const int p = tb + j;
        const int64_t off = (static_cast<int64_t>(blk[k]) * bs + p % bs) * kvd + kvh * D;
        cp_async16(kt + at, reinterpret_cast<const unsigned char*>(kpool + off) + 16 * piece);
        cp_async16(vt + at, reinterpret_cast<const unsigned char*>(vpool + off) + 16 * piece);
      } else {
        *reinterpret_cast<uint4*>(vt + at) = make_uint4(0, 0, 0, 0);
      }
    }
    cp_async_commit();
  };
  if (p_lo < p_hi) fetch_blocks(p_lo);  // the block tables are metadata: read before the wait
  pdl_trigger();
  pdl_wait();
  int issue = p_lo;  // start of the next tile to copy
#pragma unroll
  for (int s = 0; s < NS - 1; ++s) {
    if (issue < p_hi) {
      copy_tile(issue, s);
      issue += tile_len(issue);
      if (issue < p_hi) fetch_blocks(issue);
    } else {
      cp_async_commit();
    }
  }
  // Lane (g, t) holds dimensions 16 k + 2t, +1 (x[k][0..1]) and 16 k + 2t + 8, +9 (x[k][2..3]) of q head g (its A
  // fragments), of the new k and of the new v (warp 0: its P V accumulators' dimensions); rotate_half partners
  // (k and k + KS / 2) are in the same lane.
  float qf[KS][4], kf[KS][4], vf[KS][4];
  auto load_dims = [&](const float* src, float (&x)[KS][4]) {
#pragma unroll
    for (int k = 0; k < KS; ++k) {
      const float2 a = __ldcg(reinterpret_cast<const float2*>(src + 16 * k + 2 * t));
      const float2 b = __ldcg(reinterpret_cast<const float2*>(src + 16 * k + 2 * t + 8));
      x[k][0] = a.x, x[k][1] = a.y, x[k][2] = b.x, x[k][3] = b.y;
    }
  };
  auto load_pool = [&](const __nv_bfloat16* src, float (&x)[KS][4]) {
    const uint32_t* w = reinterpret_cast<const uint32_t*>(src);
#pragma unroll
    for (int k = 0; k < KS; ++k) {
      const uint32_t a = __ldcg(w + 8 * k + t), b = __ldcg(w + 8 * k + t + 4);
      x[k][0] = __uint_as_float(a << 16), x[k][1] = __uint_as_float(a & 0xffff0000u);
      x[k][2] = __uint_as_float(b << 16), x[k][3] = __uint_as_float(b & 0xffff0000u);
    }
  };
  const float* row = qkv + static_cast<int64_t>(r) * ldq;
  const bool opener = has_new && warp == 0;  // warp 0 of the last chunk starts with the new position
#pragma unroll
  for (int k = 0; k < KS; ++k)
#pragma unroll
    for (int i = 0; i < 4; ++i) qf[k][i] = kf[k][i] = vf[k][i] = 0.0f;
  if (g < G) load_dims(row + (kvh * G + g) * D, qf);
  if constexpr (FUSED) {
    if (opener) {
      load_dims(row + H * D + kvh * D, kf);
      load_dims(row + H * D + kvd + kvh * D, vf);
    }
    // RoPE at p_new (rope_kv_write's float operations), then k and v rounded to bf16.
    const float* cs = cos_t + static_cast<int64_t>(p_new) * HD;
    const float* sn = sin_t + static_cast<int64_t>(p_new) * HD;
#pragma unroll
    for (int k = 0; k < KS / 2; ++k) {
      const float2 ca = *reinterpret_cast<const float2*>(cs + 16 * k + 2 * t);
      const float2 cb = *reinterpret_cast<const float2*>(cs + 16 * k + 2 * t + 8);
      const float2 sa = *reinterpret_cast<const float2*>(sn + 16 * k + 2 * t);
      const float2 sb = *reinterpret_cast<const float2*>(sn + 16 * k + 2 * t + 8);
      const float c4[4] = {ca.x, ca.y, cb.x, cb.y}, s4[4] = {sa.x, sa.y, sb.x, sb.y};
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const float x1 = qf[k][i], x2 = qf[k + KS / 2][i];
        qf[k][i] = __fsub_rn(__fmul_rn(x1, c4[i]), __fmul_rn(x2, s4[i]));
        qf[k + KS / 2][i] = __fadd_rn(__fmul_rn(x2, c4[i]), __fmul_rn(x1, s4[i]));
        const float y1 = kf[k][i], y2 = kf[k + KS / 2][i];
        kf[k][i] = __fsub_rn(__fmul_rn(y1, c4[i]), __fmul_rn(y2, s4[i]));
        kf[k + KS / 2][i] = __fadd_rn(__fmul_rn(y2, c4[i]), __fmul_rn(y1, s4[i]));
      }
    }
#pragma unroll
    for (int k = 0; k < KS; ++k)
#pragma unroll
      for (int i = 0; i < 4; ++i)
        kf[k][i] = __bfloat162float(__float2bfloat16_rn(kf[k][i])),
        vf[k][i] = __bfloat162float(__float2bfloat16_rn(vf[k][i]));
    if (opener && g == 0) {  // the block of the last chunk writes the new position (lanes 0-3: every dimension)
      uint32_t* kw = reinterpret_cast<uint32_t*>(kpool + new_off);
      uint32_t* vw = reinterpret_cast<uint32_t*>(vpool + new_off);
#pragma unroll
      for (int k = 0; k < KS; ++k) {
        kw[8 * k + t] = pack_bf16(kf[k][0], kf[k][1]), kw[8 * k + t + 4] = pack_bf16(kf[k][2], kf[k][3]);
        vw[8 * k + t] = pack_bf16(vf[k][0], vf[k][1]), vw[8 * k + t + 4] = pack_bf16(vf[k][2], vf[k][3]);
      }
    }
  } else if (opener) {
    load_pool(kpool + new_off, kf);
    load_pool(vpool + new_off, vf);
  }
  // The new position's score of head g: float q . k over the lane's dimensions, then the row's 4 lanes.
  float s_new = 0.0f;
  if (opener) {
#pragma unroll
    for (int k = 0; k < KS; ++k)
#pragma unroll
      for (int i = 0; i < 4; ++i) s_new = __fmaf_rn(qf[k][i], kf[k][i], s_new);
    s_new = __fadd_rn(s_new, __shfl_xor_sync(0xffffffffu, s_new, 1));
    s_new = __fadd_rn(s_new, __shfl_xor_sync(0xffffffffu, s_new, 2));
    s_new = __fmul_rn(s_new, scale2);
  }
  uint32_t qa[KS][2];  // A fragments of q (rows past G are zero)
#pragma unroll
  for (int k = 0; k < KS; ++k) qa[k][0] = pack_bf16(qf[k][0], qf[k][1]), qa[k][1] = pack_bf16(qf[k][2], qf[k][3]);
  const unsigned tiles_s = static_cast<unsigned>(__cvta_generic_to_shared(tiles));
  const int wb = 16 * warp;  // the warp's positions in a tile
  int tb = p_lo, it = 0;
  for (int c = c_begin; c < c_end; ++c) {
    const int ce = min(p_new, (c + 1) * chunk);
    // Row g's state: running max m (log2 units) and sum l (the same in the row's 4 lanes); P V in o (c0, c1: the
    // lane's dimensions 8 j + 2t, +1 of row g; c2, c3 stay zero: the rows past G).
    float m = -INFINITY, l = 0.0f, o[NT][4];
#pragma unroll
    for (int j = 0; j < NT; ++j) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.0f;
    if (c == active - 1 && warp == 0 && g < G) {
      m = s_new, l = 1.0f;
#pragma unroll
      for (int k = 0; k < KS; ++k)
        o[2 * k][0] = vf[k][0], o[2 * k][1] = vf[k][1], o[2 * k + 1][0] = vf[k][2], o[2 * k + 1][1] = vf[k][3];
    }
    for (; tb < ce; ++it) {
      const int n = tile_len(tb);
      if (issue < p_hi) {
        copy_tile(issue, (it + NS - 1) % NS);
        issue += tile_len(issue);
        if (issue < p_hi) fetch_blocks(issue);
      } else {
        cp_async_commit();  // an empty group, so that the wait below always means "tile it has landed"
      }
      cp_async_wait<NS - 1>();
      __syncthreads();
      const int s = it % NS;
      if (wb < n) {
        // Scores of positions wb .. wb + 15: two 8-position MMA tiles; one ldmatrix.x4 gives two k-steps' B.
        float sc[2][4] = {};
        const unsigned kb = tiles_s + static_cast<unsigned>(s * 2 * T * RB);
#pragma unroll
        for (int k = 0; k < KS; k += 2) {
#pragma unroll
          for (int h8 = 0; h8 < 2; ++h8) {
            const int j = wb + 8 * h8 + (lane & 7), pc = 2 * k + (lane >> 3);
            uint32_t b[4];
            ldsm_x4(b, kb + j * RB + 16 * (pc ^ (j & 7)));
            mma_bf16(sc[h8], qa[k][0], qa[k][1], b[0], b[1]);
            mma_bf16(sc[h8], qa[k + 1][0], qa[k + 1][1], b[2], b[3]);
          }
        }
        // The lane's positions wb + 2t, +1, +8, +9 of row g.
        float x[4] = {sc[0][0], sc[0][1], sc[1][0], sc[1][1]};
        const int p0 = wb + 2 * t;
        const int pp[4] = {p0, p0 + 1, p0 + 8, p0 + 9};
        float mt = -INFINITY;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          x[i] = pp[i] < n && g < G ? __fmul_rn(x[i], scale2) : -INFINITY;
          mt = fmaxf(mt, x[i]);
        }
        mt = fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, 1));
        mt = fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, 2));
        const float mn = fmaxf(m, mt);
        const float corr = mn == -INFINITY ? 1.0f : exp2f(__fsub_rn(m, mn));
        float pe[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) pe[i] = x[i] == -INFINITY ? 0.0f : exp2f(__fsub_rn(x[i], mn));
        float ps = __fadd_rn(__fadd_rn(pe[0], pe[1]), __fadd_rn(pe[2], pe[3]));
        ps = __fadd_rn(ps, __shfl_xor_sync(0xffffffffu, ps, 1));
        ps = __fadd_rn(ps, __shfl_xor_sync(0xffffffffu, ps, 2));
        l = __fmaf_rn(l, corr, ps);
        m = mn;
        if (!__all_sync(0xffffffffu, corr == 1.0f)) {  // a factor of 1 leaves the bits as they are
#pragma unroll
          for (int j = 0; j < NT; ++j) o[j][0] = __fmul_rn(o[j][0], corr), o[j][1] = __fmul_rn(o[j][1], corr);
        }
        // P V: P (row g, positions 2t, +1 | 2t + 8, +9) is the A fragment; V by ldmatrix.trans, two 8-dimension
        // tiles per load (matrices: positions 0-7 / 8-15 of dimensions 8 j.., then of 8 j + 8..).
        const uint32_t pa0 = pack_bf16(pe[0], pe[1]), pa2 = pack_bf16(pe[2], pe[3]);
        const unsigned vb = kb + static_cast<unsigned>(T * RB);
#pragma unroll
        for (int j = 0; j < NT; j += 2) {
          const int mi = lane >> 3, pr = wb + 8 * (mi & 1) + (lane & 7), pc = j + (mi >> 1);
          uint32_t b[4];
          ldsm_x4_trans(b, vb + pr * RB + 16 * (pc ^ (pr & 7)));
          mma_bf16(o[j], pa0, pa2, b[0], b[1]);
          mma_bf16(o[j + 1], pa0, pa2, b[2], b[3]);
        }
      }
      __syncthreads();  // stage s is free for the tile it + NS
      tb += n;
    }
    // Warp 1's state through shared memory into warp 0's (warp order); warp 0 writes the chunk's result.
    if (warp == 1 && g < G) {
      if (t == 0) st_m[g] = m, st_l[g] = l;
#pragma unroll
      for (int j = 0; j < NT; ++j) *reinterpret_cast<float2*>(&st_o[g * D + 8 * j + 2 * t]) = make_float2(o[j][0], o[j][1]);
    }
    __syncthreads();
    if (warp == 0 && g < G) {
      const float m1 = st_m[g], l1 = st_l[g], M = fmaxf(m, m1);
      const float c0 = l == 0.0f ? 0.0f : exp2f(__fsub_rn(m, M)), c1 = l1 == 0.0f ? 0.0f : exp2f(__fsub_rn(m1, M));
      const float L = __fmaf_rn(l1, c1, __fmul_rn(l, c0));
      const int h = kvh * G + g;
      float* dst = active == 1 ? out + static_cast<int64_t>(r) * H * D + h * D
                               : part + ((static_cast<int64_t>(blockIdx.x) * H + h) * kAttentionMaxSplit + c) * (D + 2);
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        const float2 o1 = *reinterpret_cast<const float2*>(&st_o[g * D + 8 * j + 2 * t]);
        const float a = __fmaf_rn(o1.x, c1, __fmul_rn(o[j][0], c0)), b = __fmaf_rn(o1.y, c1, __fmul_rn(o[j][1], c0));
        // chunk c's state of head h: O [D] (relative to its max), max, sum; one chunk: the output
        *reinterpret_cast<float2*>(dst + 8 * j + 2 * t) =
            active == 1 ? make_float2(__fdiv_rn(a, L), __fdiv_rn(b, L)) : make_float2(a, b);
      }
      if (active > 1 && t == 0) dst[D] = M, dst[D + 1] = L;
    }
    __syncthreads();  // st_* free for the next chunk; the chunk's partials visible to the block
  }
  if (active == 1) return;
  const int64_t ck = static_cast<int64_t>(blockIdx.x) * gridDim.y + blockIdx.y;
  if (nblk > 1) {
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) is_last = atomicAdd(&cnt[ck], 1) == nblk - 1;
    __syncthreads();
    if (!is_last) return;
    __threadfence();
  }
  // The merging block (the row's only block, or the last to finish): warp w merges heads w, w + W, .. in chunk
  // order. Lane j holds chunk j's max, sum and weight; each lane loads its dimension of 8 chunks before the first
  // use.
  static_assert(kAttentionMaxSplit <= 32, "one lane per chunk");
  for (int hh = warp; hh < G; hh += W) {
    const int h = kvh * G + hh;
    const float* pb = part + (static_cast<int64_t>(blockIdx.x) * H + h) * kAttentionMaxSplit * (D + 2);
    float* op = out + static_cast<int64_t>(r) * H * D + h * D;
    const float mj = lane < active ? __ldcg(pb + lane * (D + 2) + D) : -INFINITY;
    const float lj = lane < active ? __ldcg(pb + lane * (D + 2) + D + 1) : 0.0f;
    float MM = -INFINITY;
    for (int j = 0; j < active; ++j) MM = fmaxf(MM, __shfl_sync(0xffffffffu, mj, j));
    const float wj = lj == 0.0f ? 0.0f : exp2f(__fsub_rn(mj, MM));
#pragma unroll
    for (int d = lane; d < D; d += 32) {
      float LL = 0.0f, OO = 0.0f;
      for (int j0 = 0; j0 < active; j0 += 8) {
        float ov[8];
#pragma unroll
        for (int j = 0; j < 8; ++j) ov[j] = j0 + j < active ? __ldcg(pb + (j0 + j) * (D + 2) + d) : 0.0f;
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          const float lb = __shfl_sync(0xffffffffu, lj, j0 + j), w = __shfl_sync(0xffffffffu, wj, j0 + j);
          if (j0 + j >= active || lb == 0.0f) continue;
          LL = __fmaf_rn(lb, w, LL);
          OO = __fmaf_rn(ov[j], w, OO);
        }
      }
      op[d] = __fdiv_rn(OO, LL);
    }
  }
  if (nblk > 1 && threadIdx.x == 0) cnt[ck] = 0;  // ready for the next launch (graph replay)
}

template <int D, bool FUSED, int NS>
void launch_d(dim3 grid, cudaStream_t stream, const char* what, const float* qkv, int64_t ldq, int H, int KVH,
              const float* cos_t, const float* sin_t, const int32_t* pos, const int32_t* seq, const int32_t* bt,
              int btw, int bs, __nv_bfloat16* kp, __nv_bfloat16* vp, float* out, float scale2,
              const int32_t* row_list, float* part, int32_t* cnt, int cpb) {
  constexpr size_t smem = mma_smem_bytes<D, NS>();
  static std::atomic<uint64_t> done{0};  // bit d: opted in on device d (devices >= 64: every call)
  int dev = 0;
  check(cudaGetDevice(&dev), "cudaGetDevice");
  const uint64_t bit = dev < 64 ? uint64_t{1} << dev : 0;
  if (bit == 0 || (done.load() & bit) == 0) {
    check(cudaFuncSetAttribute(attention_gqa_mma_kernel<D, FUSED, NS>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               static_cast<int>(smem)),
          "attention_gqa smem attribute");
    done.fetch_or(bit);
  }
  launch(attention_gqa_mma_kernel<D, FUSED, NS>, grid, dim3(32 * kWarps), smem, stream, what, qkv, ldq, H, KVH, cos_t,
         sin_t, pos, seq, bt, btw, bs, kp, vp, out, scale2, row_list, part, cnt, cpb);
}

}  // namespace

template <bool FUSED>
void launch_gqa_mma(const float* qkv, int64_t ldq, int rows, int H, int KVH, int D, const float* cos_t,
                    const float* sin_t, const int32_t* pos, const int32_t* seq, const int32_t* block_tables,
                    int bt_width, int block_size, void* k_pool, void* v_pool, float* out, int nsplit,
                    const int32_t* row_list, float* part, int32_t* cnt, cudaStream_t stream, int cpb) {
  // Scores in log2 units: exp2(s log2(e) / sqrt(D)) = exp(s / sqrt(D)).
  const float scale2 = static_cast<float>(1.4426950408889634 / std::sqrt(static_cast<double>(D)));
  const dim3 grid(rows, KVH, (nsplit + cpb - 1) / cpb), block(32 * kWarps);
  const char* what = FUSED ? "attention_decode_gqa (tensor cores)" : "attention_gqa (tensor cores)";
  auto* kp = static_cast<__nv_bfloat16*>(k_pool);
  auto* vp = static_cast<__nv_bfloat16*>(v_pool);
  switch (D) {
    case 64:
      launch_d<64, FUSED, kStages>(grid, stream, what, qkv, ldq, H, KVH, cos_t, sin_t, pos, seq, block_tables, bt_width,
                                   block_size, kp, vp, out, scale2, row_list, part, cnt, cpb);
      break;
    case 128:
      launch_d<128, FUSED, kStages>(grid, stream, what, qkv, ldq, H, KVH, cos_t, sin_t, pos, seq, block_tables,
                                    bt_width, block_size, kp, vp, out, scale2, row_list, part, cnt, cpb);
      break;
    default: check(cudaErrorInvalidValue, "attention_gqa (head_dim must be 64 or 128)");
  }
}

template void launch_gqa_mma<true>(const float*, int64_t, int, int, int, int, const float*, const float*,
                                   const int32_t*, const int32_t*, const int32_t*, int, int, void*, void*, float*, int,
                                   const int32_t*, float*, int32_t*, cudaStream_t, int);
template void launch_gqa_mma<false>(const float*, int64_t, int, int, int, int, const float*, const float*,
                                    const int32_t*, const int32_t*, const int32_t*, int, int, void*, void*, float*,
                                    int, const int32_t*, float*, int32_t*, cudaStream_t, int);

}  // namespace tritium::cuda
