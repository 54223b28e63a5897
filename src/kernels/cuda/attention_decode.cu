// tritium kernels/cuda: decode attention with the query heads of one KV head in one block (GQA), split over
// positions by the context length alone, so a row's result does not depend on its batch. This is the CUDA-core
// kernel of the f32 and fp8 pools; bf16 pools run on the tensor cores (attention_decode_tc.cu), after the same
// argument checks below.
//
// Grid (rows, H / HB, ceil(nsplit / CPB)). The positions 0..pos[r] of row r are cut into
// attention_gqa_chunks(pos[r] + 1) chunks of attention_gqa_chunk(pos[r] + 1) positions (a function of the context
// only); block z takes chunks z CPB .. z CPB + CPB - 1 one after another (blocks past the row's chunks return at
// once). A block holds HB warps, HB dividing G = H / KVH: warp w is query
// head kvh * G + hg * HB + w of KV head kvh (blockIdx.y = kvh * (G / HB) + hg). Batches give every query head of a
// KV head to one block (HB = G); a few rows give each head its own block (HB = 1), so that a small batch still
// fills the GPU. A head's arithmetic is the same either way: HB changes which blocks run, never a bit. The block
// copies the chunk's K and V rows of its KV head into shared memory a tile of T positions at a time (cp.async, all
// of a tile's rows in flight at once, the next tile copied while the current one is attended), so the G warps
// share one read of each row and a chunk costs one memory round trip instead of one per few positions. A warp is
// 4 groups of 8 lanes, each lane D / 8 dimensions (two runs of D / 16, rotate_half partners in one lane); a tile is
// attended in rounds of 32 positions, 8 per group: each lane forms its partial dot products of the 8 positions, a
// butterfly of 7 shuffles leaves lane i the score of position i, and the group's online-softmax state (running max,
// sum of exponentials, weighted V sum) is updated once per round (one rescale, one exponential per position). The 4
// groups' states are merged by shuffles at the end of each chunk. One chunk: the block writes the output. Several:
// each chunk's state is written to the scratch, and the block holding all of the row's chunks (after a __syncwarp),
// or else the last block of the (row, head group) to finish (an atomic counter that it resets, so graphs replay),
// merges them in chunk order. Each chunk's operations and the merge are the same whatever CPB and HB are, so neither
// changes a bit. The float operations are spelled out (no contraction left to the compiler), so the fused and the
// unfused kernel give the same bits.
//
// The chunk holding the new position pos[r] starts group 0's state with it. FUSED (decode steps): RoPE of q and
// of the new k at pos[r] from the tables (rope_kv_write's float operations), the new k and v rounded to the pool's
// element, written to the pool by warp 0 and attended from registers. Unfused (single-token rows of steps that
// also prefill, after rope_kv_write): q is read as rotated and the new position's k and v from the pool, which
// holds the same rounded values: the same result bit for bit.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/cuda/attention_gqa.cuh"
#include "kernels/cuda/kernels.h"
#include "kernels/cuda/kv_elem.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/row_ops.cuh"

namespace tritium::cuda {
namespace {

__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(gmem) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
__device__ __forceinline__ void cp_async_wait1() { asm volatile("cp.async.wait_group 1;\n" ::: "memory"); }

// Positions per shared-memory tile: two buffers of K and V tiles in 32 KB (16 f32 / 32 bf16 / 64 fp8 rows of 128
// dimensions), a multiple of 4 so that every group keeps its positions in increasing order.
template <int D, class KT>
__host__ __device__ constexpr int gqa_tile() {
  constexpr int t = 8192 / (D * static_cast<int>(sizeof(KT)));
  return t < 16 ? 16 : (t > 64 ? 64 : t);
}

// Dot product of a lane's DL dimensions, summed over the 8 lanes of its group.
template <int N>
__device__ __forceinline__ float group_dot(const float (&q)[N], const float* k) {
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < N; ++i) s = __fmaf_rn(q[i], k[i], s);
  s = __fadd_rn(s, __shfl_xor_sync(0xffffffffu, s, 1));
  s = __fadd_rn(s, __shfl_xor_sync(0xffffffffu, s, 2));
  s = __fadd_rn(s, __shfl_xor_sync(0xffffffffu, s, 4));
  return s;
}

template <int D, bool FUSED, class KT>
__global__ void __launch_bounds__(256) attention_gqa_kernel(
    const float* __restrict__ qkv, int64_t ldq, int H, int KVH, const float* __restrict__ cos_t,
    const float* __restrict__ sin_t, const int32_t* __restrict__ pos, const int32_t* __restrict__ seq,
    const int32_t* __restrict__ bt, int btw, int bs, KT* __restrict__ kpool, KT* __restrict__ vpool,
    float* __restrict__ out, float scale, float kvs, const int32_t* __restrict__ row_list, float* __restrict__ part,
    int* __restrict__ cnt, int cpb, PendingSums sums) {
  constexpr int DL = D / 8, DH = DL / 2, T = gqa_tile<D, KT>(), RB = D * static_cast<int>(sizeof(KT)), PR = RB / 16;
  static_assert(DL % 8 == 0, "head_dim must be a multiple of 64");
  static_assert(T % 4 == 0 && RB % 16 == 0, "tiles of whole groups and 16-byte pieces");
  __shared__ __align__(16) unsigned char tiles[2][2][T * RB];  // [buffer][K, V][position][D elements]
  __shared__ int first_blocks[T];
  __shared__ int is_last;
  const int G = H / KVH, HB = blockDim.x >> 5, NG = G / HB, kvd = KVH * D;
  const int kvh = blockIdx.y / NG, hg = blockIdx.y % NG, z = blockIdx.z;
  const int r = row_list ? row_list[blockIdx.x] : blockIdx.x;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, grp = lane >> 3, sub = lane & 7;
  const int h = kvh * G + hg * HB + warp;
  // Metadata is not written by kernels: read before waiting for the previous kernel.
  const int p_new = pos[r], n_all = p_new + 1;
  const int chunk = gqa_chunk(n_all), active = (n_all + chunk - 1) / chunk;
  const int nblk = (active + cpb - 1) / cpb;  // blocks of this row
  if (z >= nblk) {
    pdl_trigger();
    return;
  }
  // Chunks c_begin .. c_end - 1, pool positions p_lo .. p_hi - 1 (contiguous: every chunk but the last is full).
  const int c_begin = z * cpb, c_end = min(active, c_begin + cpb);
  const int p_lo = c_begin * chunk, p_hi = min(p_new, c_end * chunk);
  const bool has_new = c_end == active;
  // Positions of the tile starting at tb: at most T, never past the end of tb's chunk.
  auto tile_len = [&](int tb) { return min(T, min(p_hi, (tb / chunk + 1) * chunk) - tb); };
  const int32_t* table = bt + static_cast<int64_t>(seq[r]) * btw;
  // Lane sub of a group holds dimensions d0 .. d0 + DH - 1 and d1 .. d1 + DH - 1 (rotate_half partners, the same
  // cos / sin), so a group reads a K / V row as two runs of 8 consecutive pieces.
  const int d0 = sub * DH, d1 = D / 2 + sub * DH;
  float cs[FUSED ? DH : 1], sn[FUSED ? DH : 1];
  if constexpr (FUSED) {
    const int64_t cb = static_cast<int64_t>(p_new) * (D / 2) + d0;
#pragma unroll
    for (int i = 0; i < DH; ++i) cs[i] = cos_t[cb + i], sn[i] = sin_t[cb + i];
  }
  const int64_t new_off = (static_cast<int64_t>(table[p_new / bs]) * bs + p_new % bs) * kvd + kvh * D;
  // The first tile's pool blocks, read before the wait (the block tables are metadata), so that its copies start
  // right after it.
  const int b0 = p_lo / bs;
  const int nb0 = p_lo < p_hi ? (p_lo + tile_len(p_lo) - 1) / bs - b0 + 1 : 0;
  for (int i = threadIdx.x; i < nb0; i += blockDim.x) first_blocks[i] = table[b0 + i];
  // Copies the K and V rows of the tile at tb into buffer b (one commit group): thread i copies piece i % PR of
  // every (blockDim / PR)-th row (PR and blockDim are powers of two, PR <= 32).
  auto copy_tile = [&](int tb, int b) {
    const int n = tile_len(tb), c = threadIdx.x % PR;
    for (int j = threadIdx.x / PR; j < n; j += blockDim.x / PR) {
      const int p = tb + j;
      const int blk = tb == p_lo ? first_blocks[p / bs - b0] : table[p / bs];
      const int64_t off = (static_cast<int64_t>(blk) * bs + p % bs) * kvd + kvh * D;
      cp_async16(&tiles[b][0][j * RB + 16 * c], reinterpret_cast<const unsigned char*>(kpool + off) + 16 * c);
      cp_async16(&tiles[b][1][j * RB + 16 * c], reinterpret_cast<const unsigned char*>(vpool + off) + 16 * c);
    }
    cp_async_commit();
  };
  pdl_trigger();
  pdl_wait();
  __syncthreads();  // first_blocks
  if (p_lo < p_hi) copy_tile(p_lo, 0);
  const float* row = qkv + static_cast<int64_t>(r) * ldq;
  // Element i < DH of a lane's array is dimension d0 + i, element DH + i dimension d1 + i. col: the head's first
  // column in the row: from the floats of qkv, or (fused, sums.acc) from the qkv projection's pending int8-GEMM sums
  // through its epilogue (the same values bit for bit).
  auto load_q = [&](int col, float (&v)[DL]) {
    if (FUSED && sums.acc) {
      const SumsRow sr{sums.acc + static_cast<int64_t>(r) * sums.ldacc, sums.inv_s[r], sums.ep.seg_end[0],
                       sums.ep.seg_end[1], sums.ep.seg_scale[0], sums.ep.seg_scale[1], sums.ep.seg_scale[2]};
#pragma unroll
      for (int i = 0; i < DH; i += 4) {
        const float4 a = sr.value4((col + d0 + i) / 4), b = sr.value4((col + d1 + i) / 4);
        v[i] = a.x, v[i + 1] = a.y, v[i + 2] = a.z, v[i + 3] = a.w;
        v[DH + i] = b.x, v[DH + i + 1] = b.y, v[DH + i + 2] = b.z, v[DH + i + 3] = b.w;
      }
      return;
    }
#pragma unroll
    for (int i = 0; i < DH; i += 4) {
      const float4 a = __ldcg(reinterpret_cast<const float4*>(row + col + d0 + i));
      const float4 b = __ldcg(reinterpret_cast<const float4*>(row + col + d1 + i));
      v[i] = a.x, v[i + 1] = a.y, v[i + 2] = a.z, v[i + 3] = a.w;
      v[DH + i] = b.x, v[DH + i + 1] = b.y, v[DH + i + 2] = b.z, v[DH + i + 3] = b.w;
    }
  };
  auto load_kv = [&](const KT* src, float (&v)[DL]) {
    float4 a[DH / 4], b[DH / 4];
    if constexpr (DH % 8 == 0) {
      KvIO<KT>::template load<DH>(src + d0, a, kvs);
      KvIO<KT>::template load<DH>(src + d1, b, kvs);
    } else {
#pragma unroll
      for (int i = 0; i < DH / 4; ++i) a[i] = KvIO<KT>::load4(src + d0 + 4 * i, kvs);
#pragma unroll
      for (int i = 0; i < DH / 4; ++i) b[i] = KvIO<KT>::load4(src + d1 + 4 * i, kvs);
    }
#pragma unroll
    for (int i = 0; i < DH / 4; ++i) {
      v[4 * i] = a[i].x, v[4 * i + 1] = a[i].y, v[4 * i + 2] = a[i].z, v[4 * i + 3] = a[i].w;
      v[DH + 4 * i] = b[i].x, v[DH + 4 * i + 1] = b[i].y, v[DH + 4 * i + 2] = b[i].z, v[DH + 4 * i + 3] = b[i].w;
    }
  };
  float qv[DL], kc[DL], vc[DL];
  load_q(h * D, qv);
  if constexpr (FUSED) {
    load_q(H * D + kvh * D, kc);
    load_q(H * D + kvd + kvh * D, vc);
    auto rope = [&](float (&v)[DL]) {
#pragma unroll
      for (int i = 0; i < DH; ++i) {
        const float x1 = v[i], x2 = v[DH + i];
        v[i] = __fsub_rn(__fmul_rn(x1, cs[i]), __fmul_rn(x2, sn[i]));
        v[DH + i] = __fadd_rn(__fmul_rn(x2, cs[i]), __fmul_rn(x1, sn[i]));
      }
    };
    rope(qv);
    rope(kc);
#pragma unroll
    for (int i = 0; i < DL; ++i) kc[i] = KvIO<KT>::round(kc[i], kvs), vc[i] = KvIO<KT>::round(vc[i], kvs);
    if (has_new && hg == 0 && warp == 0 && grp == 0) {  // one block per KV head writes the new position
#pragma unroll
      for (int i = 0; i < DH; ++i) {
        KvIO<KT>::store(kpool + new_off + d0 + i, kc[i], kvs);
        KvIO<KT>::store(kpool + new_off + d1 + i, kc[DH + i], kvs);
        KvIO<KT>::store(vpool + new_off + d0 + i, vc[i], kvs);
        KvIO<KT>::store(vpool + new_off + d1 + i, vc[DH + i], kvs);
      }
    }
  } else if (has_new) {
    load_kv(kpool + new_off, kc);
    load_kv(vpool + new_off, vc);
  }
  // The new position's score (every lane: the dot product shuffles); it opens group 0's state of the last chunk.
  const float s_new = has_new ? __fmul_rn(group_dot(qv, kc), scale) : 0.0f;
  const int64_t rh = static_cast<int64_t>(blockIdx.x) * H + h;
  float* op = out + static_cast<int64_t>(r) * H * D + h * D;
  // Chunk by chunk, tile by tile (the loop bounds are uniform over the block, so every lane reaches the shuffles and
  // barriers; positions past a tile's end are masked); the next tile, possibly the next chunk's first, is copied
  // while the current one is attended.
  int tb = p_lo, it = 0;
  for (int c = c_begin; c < c_end; ++c) {
    const int ce = min(p_new, (c + 1) * chunk);
    // Group state: running max m and sum l (the same in the group's 8 lanes), the lane's dimensions of the weighted
    // V sum o. The last chunk's group 0 starts with the new position (softmax of one score: weight 1).
    const bool opens = c == active - 1 && grp == 0;
    float m = opens ? s_new : -INFINITY, l = opens ? 1.0f : 0.0f, o[DL];
#pragma unroll
    for (int i = 0; i < DL; ++i) o[i] = opens ? vc[i] : 0.0f;
    for (; tb < ce; ++it) {
      const int n = tile_len(tb), nx = tb + n;
      if (nx < p_hi) {
        copy_tile(nx, (it + 1) & 1);
      } else {
        cp_async_commit();  // an empty group, so that wait_group 1 always means "tile it has landed"
      }
      cp_async_wait1();
      __syncthreads();
      const unsigned char* kt = tiles[it & 1][0];
      const unsigned char* vt = tiles[it & 1][1];
      // Rounds of 32 positions: group grp takes positions base .. base + 7.
      for (int rb = 0; rb < n; rb += 32) {
        const int base = rb + 8 * grp;
        // The lane's partial dot products of the 8 positions, then a butterfly that leaves lane sub the group's
        // sum for position base + sub (7 shuffles for 8 scores).
        float d[8];
#pragma unroll
        for (int i = 0; i < 8; ++i) {
          d[i] = 0.0f;
          if (base + i < n) {
            float kf[DL];
            load_kv(reinterpret_cast<const KT*>(kt + (base + i) * RB), kf);
            float a = 0.0f;
#pragma unroll
            for (int k = 0; k < DL; ++k) a = __fmaf_rn(qv[k], kf[k], a);
            d[i] = a;
          }
        }
#pragma unroll
        for (int w = 4; w >= 1; w >>= 1) {  // keep the half of the values this lane's bit w selects
          const bool upper = sub & w;
#pragma unroll
          for (int k = 0; k < w; ++k) {
            const float keep = upper ? d[k + w] : d[k], send = upper ? d[k] : d[k + w];
            d[k] = __fadd_rn(keep, __shfl_xor_sync(0xffffffffu, send, w));
          }
        }
        const bool valid = base + sub < n;
        const float sc = valid ? __fmul_rn(d[0], scale) : -INFINITY;
        float mt = sc;
        mt = fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, 1));
        mt = fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, 2));
        mt = fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, 4));
        const float mn = fmaxf(m, mt);
        const float corr = mn == -INFINITY ? 1.0f : expf(__fsub_rn(m, mn));
        const float pe = valid ? expf(__fsub_rn(sc, mn)) : 0.0f;
        float ps = pe;
        ps = __fadd_rn(ps, __shfl_xor_sync(0xffffffffu, ps, 1));
        ps = __fadd_rn(ps, __shfl_xor_sync(0xffffffffu, ps, 2));
        ps = __fadd_rn(ps, __shfl_xor_sync(0xffffffffu, ps, 4));
        l = __fmaf_rn(l, corr, ps);
        m = mn;
#pragma unroll
        for (int k = 0; k < DL; ++k) o[k] = __fmul_rn(o[k], corr);
#pragma unroll
        for (int i = 0; i < 8; ++i) {
          const float pi = __shfl_sync(0xffffffffu, pe, (lane & ~7) | i);
          if (base + i < n) {
            float vf[DL];
            load_kv(reinterpret_cast<const KT*>(vt + (base + i) * RB), vf);
#pragma unroll
            for (int k = 0; k < DL; ++k) o[k] = __fmaf_rn(pi, vf[k], o[k]);
          }
        }
      }
      __syncthreads();  // buffer it & 1 is free for tile it + 2
      tb = nx;
    }
    // Merge the 4 groups (lanes sub, sub + 8, sub + 16, sub + 24); an empty state (l = 0, m = -inf) weighs 0.
#pragma unroll
    for (int off = 8; off <= 16; off *= 2) {
      const float m2 = __shfl_xor_sync(0xffffffffu, m, off), l2 = __shfl_xor_sync(0xffffffffu, l, off);
      const float mn = fmaxf(m, m2);
      const float c1 = l == 0.0f ? 0.0f : expf(__fsub_rn(m, mn)), c2 = l2 == 0.0f ? 0.0f : expf(__fsub_rn(m2, mn));
#pragma unroll
      for (int i = 0; i < DL; ++i) {
        const float o2 = __shfl_xor_sync(0xffffffffu, o[i], off);
        o[i] = __fmaf_rn(o[i], c1, __fmul_rn(o2, c2));
      }
      l = __fmaf_rn(l, c1, __fmul_rn(l2, c2));
      m = mn;
    }
    if (active == 1) {  // one chunk: the output itself
      if (grp == 0) {
#pragma unroll
        for (int i = 0; i < DH; i += 4) {
          *reinterpret_cast<float4*>(op + d0 + i) = make_float4(__fdiv_rn(o[i], l), __fdiv_rn(o[i + 1], l),
                                                                __fdiv_rn(o[i + 2], l), __fdiv_rn(o[i + 3], l));
          *reinterpret_cast<float4*>(op + d1 + i) =
              make_float4(__fdiv_rn(o[DH + i], l), __fdiv_rn(o[DH + i + 1], l), __fdiv_rn(o[DH + i + 2], l),
                          __fdiv_rn(o[DH + i + 3], l));
        }
      }
      return;
    }
    // Partial state of chunk c for head h: O [D] (relative to its max), max, sum.
    float* pp = part + (rh * kAttentionMaxSplit + c) * (D + 2);
    if (grp == 0) {
#pragma unroll
      for (int i = 0; i < DH; ++i) pp[d0 + i] = o[i], pp[d1 + i] = o[DH + i];
      if (sub == 0) pp[D] = m, pp[D + 1] = l;
    }
  }
  const int64_t ck = static_cast<int64_t>(blockIdx.x) * gridDim.y + blockIdx.y;
  if (nblk == 1) {
    __syncwarp();  // the warp merges the chunks it wrote itself (the barrier orders its lanes' memory accesses)
  } else {
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) is_last = atomicAdd(&cnt[ck], 1) == nblk - 1;
    __syncthreads();
    if (!is_last) return;
    __threadfence();
  }
  // The merging block (the row's only block, or the last to finish): the warp of head h merges its chunks in chunk
  // order. Lane j holds chunk j's max, sum and weight; each lane loads its dimension of 8 chunks before the first
  // use, so the merge costs a few round trips to L2 instead of one per chunk and dimension.
  static_assert(kAttentionMaxSplit <= 32, "one lane per chunk");
  const float* pb = part + rh * kAttentionMaxSplit * (D + 2);
  const float mj = lane < active ? __ldcg(pb + lane * (D + 2) + D) : -INFINITY;
  const float lj = lane < active ? __ldcg(pb + lane * (D + 2) + D + 1) : 0.0f;
  float MM = -INFINITY;
  for (int j = 0; j < active; ++j) MM = fmaxf(MM, __shfl_sync(0xffffffffu, mj, j));
  const float wj = lj == 0.0f ? 0.0f : expf(__fsub_rn(mj, MM));
#pragma unroll
  for (int d = lane; d < D; d += 32) {
    float LL = 0.0f, OO = 0.0f;
    for (int j0 = 0; j0 < active; j0 += 8) {  // 8 chunks' values in flight at a time
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
  if (nblk > 1 && threadIdx.x == 0) cnt[ck] = 0;  // ready for the next launch (graph replay)
}

template <bool FUSED, class KT>
void launch_gqa(const float* qkv, int64_t ldq, int rows, int H, int KVH, int D, const float* cos_t,
                const float* sin_t, const int32_t* pos, const int32_t* seq, const int32_t* block_tables, int bt_width,
                int block_size, KT* k_pool, KT* v_pool, float* out, int nsplit, const int32_t* row_list, float* part,
                int32_t* cnt, cudaStream_t stream, float kvs, int hb, int cpb, const PendingSums& sums) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  const dim3 grid(rows, H / hb, (nsplit + cpb - 1) / cpb), block(32 * hb);
  const char* what = FUSED ? "attention_decode_gqa" : "attention_gqa";
  switch (D) {
    case 64:
      launch(attention_gqa_kernel<64, FUSED, KT>, grid, block, 0, stream, what, qkv, ldq, H, KVH, cos_t, sin_t, pos,
             seq, block_tables, bt_width, block_size, k_pool, v_pool, out, scale, kvs, row_list, part, cnt, cpb, sums);
      break;
    case 128:
      launch(attention_gqa_kernel<128, FUSED, KT>, grid, block, 0, stream, what, qkv, ldq, H, KVH, cos_t, sin_t, pos,
             seq, block_tables, bt_width, block_size, k_pool, v_pool, out, scale, kvs, row_list, part, cnt, cpb, sums);
      break;
    default: check(cudaErrorInvalidValue, "attention_gqa (head_dim must be 64 or 128)");
  }
}

template <bool FUSED>
void run_gqa(const float* qkv, int64_t ldq, int rows, int H, int KVH, int D, const float* cos_t, const float* sin_t,
             const int32_t* pos, const int32_t* seq, const int32_t* block_tables, int bt_width, int block_size,
             void* k_pool, void* v_pool, float* out, int nsplit, const int32_t* row_list, float* part, int32_t* cnt,
             cudaStream_t stream, KvFormat kv, int hb, int cpb, int warps, const PendingSums& sums) {
  if (rows <= 0) return;
  if (sums.acc && (!sums.inv_s || sums.ldacc % 4 || sums.parts != 1 || reinterpret_cast<uintptr_t>(sums.acc) % 16 ||
                   sums.ldacc < static_cast<int64_t>(H + 2 * KVH) * D))
    check(cudaErrorInvalidValue,
          "attention_decode_gqa (pending qkv sums: one part, ldacc a multiple of 4 >= the row, 16-byte aligned)");
  if (!attention_gqa_supported(H, KVH, D))
    check(cudaErrorInvalidValue, "attention_gqa (H / KVH must be an integer in 1..8, head_dim 64 or 128)");
  const int G = H / KVH;
  if (hb == 0) {  // automatic: one block per query head while the (row, KV head) blocks would not fill the SMs
    hb = static_cast<int64_t>(rows) * KVH < sm_count() ? 1 : G;
  }
  if (hb != 1 && hb != G) check(cudaErrorInvalidValue, "attention_gqa (heads per block must be 0, 1 or H / KVH)");
  if (nsplit < 1 || nsplit > kAttentionMaxSplit || (nsplit > 1 && (!part || !cnt)))
    check(cudaErrorInvalidValue, "attention_gqa (nsplit out of [1, kAttentionMaxSplit], or scratch missing)");
  if (cpb < 0 || cpb > kAttentionMaxSplit)
    check(cudaErrorInvalidValue, "attention_gqa (chunks per block out of [0, kAttentionMaxSplit])");
  if (warps < 0 || warps > kGqaTcMaxWarps)
    check(cudaErrorInvalidValue, "attention_gqa (warps per block out of [0, 4])");
  if (kv.elem == KvElem::kBF16) {  // the tensor cores (attention_decode_tc.cu); heads per block does not apply
    attention_gqa_tc(FUSED, qkv, ldq, rows, H, KVH, D, cos_t, sin_t, pos, seq, block_tables, bt_width, block_size,
                     static_cast<__nv_bfloat16*>(k_pool), static_cast<__nv_bfloat16*>(v_pool), out, nsplit, row_list,
                     part, cnt, stream, cpb, warps, sums);
    return;
  }
  if (cpb == 0) cpb = attention_gqa_chunks_per_block(rows, H, nsplit);
  with_kv_type(kv.elem, [&](auto tag) {
    using KT = decltype(tag);
    launch_gqa<FUSED>(qkv, ldq, rows, H, KVH, D, cos_t, sin_t, pos, seq, block_tables, bt_width, block_size,
                      static_cast<KT*>(k_pool), static_cast<KT*>(v_pool), out, nsplit, row_list, part, cnt, stream,
                      kv.scale, hb, cpb, sums);
  });
}

}  // namespace

bool attention_gqa_supported(int H, int KVH, int D) {
  return KVH > 0 && H % KVH == 0 && H / KVH <= 8 && (D == 64 || D == 128);
}

int attention_gqa_chunks_per_block(int rows, int warps_per_chunk, int nsplit) {
  // Fewer, longer blocks pay the block's fixed latency (metadata, q, the first tile's round trip) once and merge their
  // own chunks without the counter, but a block attends its chunks one after another: keep at least 4 warps per SM
  // and at most ~256 positions per block. Contexts up to kAttentionMaxSplit gqa_chunk(1) positions are cut into chunks
  // of gqa_chunk(1); a longer one gets chunks of at least gqa_chunk(past) positions, and at least
  // attention_gqa_chunks(past) of them, so below that count every chunk has gqa_chunk(1) positions. Measured on the
  // H200 at 1-256 rows x contexts 128-1024 (bench/CUDA_NOTES.md).
  constexpr int kWarpsPerSm = 4, kMaxPositions = 256;
  const int small = gqa_chunk(1), past = small * kAttentionMaxSplit + 1;
  const int min_chunk = nsplit < attention_gqa_chunks(past) ? small : gqa_chunk(past);
  const int cap = std::min(nsplit, std::max(1, kMaxPositions / min_chunk));
  const int64_t warps = static_cast<int64_t>(std::max(rows, 0)) * std::max(warps_per_chunk, 1);
  int c = 1;
  while (2 * c <= cap && warps * ((nsplit + 2 * c - 1) / (2 * c)) >= static_cast<int64_t>(kWarpsPerSm) * sm_count())
    c *= 2;
  return c;
}

int attention_gqa_chunks(int64_t n) {
  if (n <= 0) return 1;
  const int ni = static_cast<int>(std::min<int64_t>(n, INT32_MAX));
  const int c = gqa_chunk(ni);
  return (ni + c - 1) / c;
}

void attention_decode_gqa(const float* qkv, int64_t ldq, int rows, int H, int KVH, int D, const float* cos_t,
                          const float* sin_t, const int32_t* pos, const int32_t* seq, const int32_t* block_tables,
                          int bt_width, int block_size, void* k_pool, void* v_pool, float* out, int nsplit,
                          float* partial, int32_t* counters, cudaStream_t stream, KvFormat kv, int heads_per_block,
                          int chunks_per_block, const PendingSums* qkv_sums, int warps_per_block) {
  run_gqa<true>(qkv, ldq, rows, H, KVH, D, cos_t, sin_t, pos, seq, block_tables, bt_width, block_size, k_pool, v_pool,
                out, nsplit, nullptr, partial, counters, stream, kv, heads_per_block, chunks_per_block,
                warps_per_block, qkv_sums ? *qkv_sums : PendingSums{});
}

void attention_gqa(const float* q, int64_t ldq, const int32_t* row_list, int rows, int H, int KVH, int D,
                   const int32_t* pos, const int32_t* seq, const int32_t* block_tables, int bt_width, int block_size,
                   const void* k_pool, const void* v_pool, float* out, int nsplit, float* partial, int32_t* counters,
                   cudaStream_t stream, KvFormat kv, int heads_per_block, int chunks_per_block, int warps_per_block) {
  run_gqa<false>(q, ldq, rows, H, KVH, D, nullptr, nullptr, pos, seq, block_tables, bt_width, block_size,
                 const_cast<void*>(k_pool), const_cast<void*>(v_pool), out, nsplit, row_list, partial, counters,
                 stream, kv, heads_per_block, chunks_per_block, warps_per_block, PendingSums{});
}

}  // namespace tritium::cuda
