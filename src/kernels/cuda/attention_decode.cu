// tritium kernels/cuda: decode attention with the query heads of one KV head in one block (GQA), split over
// positions by the context length alone, so a row's result does not depend on its batch.
//
// Grid (rows, H / HB, nsplit). The positions 0..pos[r] of row r are cut into attention_gqa_chunks(pos[r] + 1)
// chunks of attention_gqa_chunk(pos[r] + 1) positions (a function of the context only); block z takes chunk z
// (blocks past the row's chunks return at once). A block holds HB warps, HB dividing G = H / KVH: warp w is query
// head kvh * G + hg * HB + w of KV head kvh (blockIdx.y = kvh * (G / HB) + hg). Batches give every query head of a
// KV head to one block (HB = G); a few rows give each head its own block (HB = 1), so that a small batch still
// fills the GPU. A head's arithmetic is the same either way: HB changes which blocks run, never a bit. The block
// copies the chunk's K and V rows of its KV head into shared memory a tile of T positions at a time (cp.async, all
// of a tile's rows in flight at once, the next tile copied while the current one is attended), so the G warps
// share one read of each row and a chunk costs one memory round trip instead of one per few positions. A warp is
// 4 groups of 8 lanes; group j takes positions j, j + 4, ... of the chunk, each lane D / 8 dimensions (rotate_half
// partners in lanes sub and sub ^ 4), with an online-softmax state (running max, sum of exponentials, weighted V
// sum); the 4 states are merged by shuffles. One chunk: the block writes the output. Several: each block writes
// its partial state and the last block of the (row, head group) to finish merges them in chunk order (an atomic
// counter that it resets, so graphs replay). The float operations are spelled out (no contraction left to the
// compiler), so the fused and the unfused kernel give the same bits.
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

#include "kernels/cuda/kernels.h"
#include "kernels/cuda/kv_elem.cuh"
#include "kernels/cuda/launch.cuh"

namespace tritium::cuda {
namespace {

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
__device__ __forceinline__ void cp_async_wait1() { asm volatile("cp.async.wait_group 1;\n" ::: "memory"); }

// Positions per shared-memory tile: two buffers of K and V tiles in 32 KB (16 f32 / 32 bf16 / 64 fp8 rows of 128
// dimensions), a multiple of 4 so that every group keeps its positions in increasing order.
template <int D, class KT>
__host__ __device__ constexpr int gqa_tile() {
  constexpr int t = 8192 / (D * static_cast<int>(sizeof(KT)));
  return t < 16 ? 16 : (t > 64 ? 64 : t);
}

// Online-softmax update of (m, l, o) with score s (already scaled) and value row v.
template <int N>
__device__ __forceinline__ void softmax_add(float& m, float& l, float (&o)[N], float s, const float* v) {
  const float mn = fmaxf(m, s);
  const float corr = expf(__fsub_rn(m, mn)), pe = expf(__fsub_rn(s, mn));
  l = __fmaf_rn(l, corr, pe);
#pragma unroll
  for (int i = 0; i < N; ++i) o[i] = __fmaf_rn(o[i], corr, __fmul_rn(pe, v[i]));
  m = mn;
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
    int* __restrict__ cnt) {
  constexpr int DL = D / 8, T = gqa_tile<D, KT>(), RB = D * static_cast<int>(sizeof(KT)), PR = RB / 16;
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
  if (z >= active) {
    pdl_trigger();
    return;
  }
  const int p_begin = z * chunk, p_end = min(p_new, p_begin + chunk);  // pool positions of this block
  const bool has_new = z == active - 1;
  const int32_t* table = bt + static_cast<int64_t>(seq[r]) * btw;
  float cs[FUSED ? DL : 1], sn[FUSED ? DL : 1];
  if constexpr (FUSED) {
    const int64_t cb = static_cast<int64_t>(p_new) * (D / 2) + (sub % 4) * DL;
#pragma unroll
    for (int i = 0; i < DL; ++i) cs[i] = cos_t[cb + i], sn[i] = sin_t[cb + i];
  }
  const int64_t new_off =
      (static_cast<int64_t>(table[p_new / bs]) * bs + p_new % bs) * kvd + kvh * D + sub * DL;
  // The first tile's pool blocks, read before the wait (the block tables are metadata), so that its copies start
  // right after it.
  const int b0 = p_begin / bs;
  const int nb0 = p_begin < p_end ? (min(p_begin + T, p_end) - 1) / bs - b0 + 1 : 0;
  for (int i = threadIdx.x; i < nb0; i += blockDim.x) first_blocks[i] = table[b0 + i];
  // Copies the K and V rows of positions tb .. min(tb + T, p_end) - 1 into buffer b (one commit group): thread
  // i copies piece i % PR of every (blockDim / PR)-th row (PR and blockDim are powers of two, PR <= 32).
  auto copy_tile = [&](int tb, int b) {
    const int n = min(T, p_end - tb), c = threadIdx.x % PR;
    for (int j = threadIdx.x / PR; j < n; j += blockDim.x / PR) {
      const int p = tb + j;
      const int blk = tb == p_begin ? first_blocks[p / bs - b0] : table[p / bs];
      const int64_t off = (static_cast<int64_t>(blk) * bs + p % bs) * kvd + kvh * D;
      cp_async16(&tiles[b][0][j * RB + 16 * c], reinterpret_cast<const unsigned char*>(kpool + off) + 16 * c);
      cp_async16(&tiles[b][1][j * RB + 16 * c], reinterpret_cast<const unsigned char*>(vpool + off) + 16 * c);
    }
    cp_async_commit();
  };
  pdl_trigger();
  pdl_wait();
  __syncthreads();  // first_blocks
  if (p_begin < p_end) copy_tile(p_begin, 0);
  const float* row = qkv + static_cast<int64_t>(r) * ldq;
  float qv[DL], kc[DL], vc[DL];
#pragma unroll
  for (int i = 0; i < DL; i += 4) {
    const float4 a = __ldcg(reinterpret_cast<const float4*>(row + h * D + sub * DL + i));
    qv[i] = a.x, qv[i + 1] = a.y, qv[i + 2] = a.z, qv[i + 3] = a.w;
  }
  if constexpr (FUSED) {
#pragma unroll
    for (int i = 0; i < DL; i += 4) {
      const float4 b = __ldcg(reinterpret_cast<const float4*>(row + H * D + kvh * D + sub * DL + i));
      const float4 c = __ldcg(reinterpret_cast<const float4*>(row + H * D + kvd + kvh * D + sub * DL + i));
      kc[i] = b.x, kc[i + 1] = b.y, kc[i + 2] = b.z, kc[i + 3] = b.w;
      vc[i] = c.x, vc[i + 1] = c.y, vc[i + 2] = c.z, vc[i + 3] = c.w;
    }
    auto rope = [&](float (&v)[DL]) {
#pragma unroll
      for (int i = 0; i < DL; ++i) {
        const float other = __shfl_xor_sync(0xffffffffu, v[i], 4);
        v[i] = sub < 4 ? __fsub_rn(__fmul_rn(v[i], cs[i]), __fmul_rn(other, sn[i]))
                       : __fadd_rn(__fmul_rn(v[i], cs[i]), __fmul_rn(other, sn[i]));
      }
    };
    rope(qv);
    rope(kc);
#pragma unroll
    for (int i = 0; i < DL; ++i) kc[i] = KvIO<KT>::round(kc[i], kvs), vc[i] = KvIO<KT>::round(vc[i], kvs);
    if (has_new && hg == 0 && warp == 0 && grp == 0) {  // one block per KV head writes the new position
#pragma unroll
      for (int i = 0; i < DL; ++i) {
        KvIO<KT>::store(kpool + new_off + i, kc[i], kvs);
        KvIO<KT>::store(vpool + new_off + i, vc[i], kvs);
      }
    }
  } else if (has_new) {
    float4 k4[DL / 4], v4[DL / 4];
    KvIO<KT>::template load<DL>(kpool + new_off, k4, kvs);
    KvIO<KT>::template load<DL>(vpool + new_off, v4, kvs);
#pragma unroll
    for (int i = 0; i < DL / 4; ++i) {
      kc[4 * i] = k4[i].x, kc[4 * i + 1] = k4[i].y, kc[4 * i + 2] = k4[i].z, kc[4 * i + 3] = k4[i].w;
      vc[4 * i] = v4[i].x, vc[4 * i + 1] = v4[i].y, vc[4 * i + 2] = v4[i].z, vc[4 * i + 3] = v4[i].w;
    }
  }
  float m = -INFINITY, l = 0.0f, o[DL];
#pragma unroll
  for (int i = 0; i < DL; ++i) o[i] = 0.0f;
  if (has_new) {  // warp-uniform: the new position first, in group 0's state
    const float sc = __fmul_rn(group_dot(qv, kc), scale);
    if (grp == 0) softmax_add(m, l, o, sc, vc);
  }
  // Tile by tile (the loop bounds are uniform over the block, so every lane reaches the shuffles and barriers);
  // positions past the end are masked.
  for (int tb = p_begin, it = 0; tb < p_end; tb += T, ++it) {
    if (tb + T < p_end) {
      copy_tile(tb + T, (it + 1) & 1);
    } else {
      cp_async_commit();  // an empty group, so that wait_group 1 always means "tile it has landed"
    }
    cp_async_wait1();
    __syncthreads();
    const unsigned char* kt = tiles[it & 1][0];
    const unsigned char* vt = tiles[it & 1][1];
#pragma unroll 2
    for (int u = 0; u < T / 4; ++u) {
      const int j = grp + 4 * u, p = tb + j;
      float4 kk[DL / 4], vv[DL / 4];
      if (p < p_end) {
        KvIO<KT>::template load<DL>(reinterpret_cast<const KT*>(kt + j * RB) + sub * DL, kk, kvs);
        KvIO<KT>::template load<DL>(reinterpret_cast<const KT*>(vt + j * RB) + sub * DL, vv, kvs);
      }
      const float s = __fmul_rn(group_dot(qv, reinterpret_cast<const float*>(kk)), scale);
      if (p < p_end) softmax_add(m, l, o, s, reinterpret_cast<const float*>(vv));
    }
    __syncthreads();  // buffer it & 1 is free for tile it + 2
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
  float* op = out + static_cast<int64_t>(r) * H * D + h * D;
  if (active == 1) {
    if (grp == 0) {
#pragma unroll
      for (int i = 0; i < DL; i += 4)
        *reinterpret_cast<float4*>(op + sub * DL + i) =
            make_float4(__fdiv_rn(o[i], l), __fdiv_rn(o[i + 1], l), __fdiv_rn(o[i + 2], l), __fdiv_rn(o[i + 3], l));
    }
    return;
  }
  // Partial state of chunk z for head h: O [D] (relative to its max), max, sum.
  const int64_t rh = static_cast<int64_t>(blockIdx.x) * H + h;
  float* pp = part + (rh * kAttentionMaxSplit + z) * (D + 2);
  if (grp == 0) {
#pragma unroll
    for (int i = 0; i < DL; ++i) pp[sub * DL + i] = o[i];
    if (sub == 0) pp[D] = m, pp[D + 1] = l;
  }
  __threadfence();
  __syncthreads();
  const int64_t ck = static_cast<int64_t>(blockIdx.x) * gridDim.y + blockIdx.y;
  if (threadIdx.x == 0) is_last = atomicAdd(&cnt[ck], 1) == active - 1;
  __syncthreads();
  if (!is_last) return;
  __threadfence();
  // The last block: the warp of head h merges its chunks in chunk order. Lane j holds chunk j's max, sum and
  // weight; each lane loads its dimension of 8 chunks before the first use, so the merge costs a few round trips to
  // L2 instead of one per chunk and dimension.
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
  if (threadIdx.x == 0) cnt[ck] = 0;  // ready for the next launch (graph replay)
}

template <bool FUSED, class KT>
void launch_gqa(const float* qkv, int64_t ldq, int rows, int H, int KVH, int D, const float* cos_t,
                const float* sin_t, const int32_t* pos, const int32_t* seq, const int32_t* block_tables, int bt_width,
                int block_size, KT* k_pool, KT* v_pool, float* out, int nsplit, const int32_t* row_list, float* part,
                int32_t* cnt, cudaStream_t stream, float kvs, int hb) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  const dim3 grid(rows, H / hb, nsplit), block(32 * hb);
  const char* what = FUSED ? "attention_decode_gqa" : "attention_gqa";
  switch (D) {
    case 64:
      launch(attention_gqa_kernel<64, FUSED, KT>, grid, block, 0, stream, what, qkv, ldq, H, KVH, cos_t, sin_t, pos,
             seq, block_tables, bt_width, block_size, k_pool, v_pool, out, scale, kvs, row_list, part, cnt);
      break;
    case 128:
      launch(attention_gqa_kernel<128, FUSED, KT>, grid, block, 0, stream, what, qkv, ldq, H, KVH, cos_t, sin_t, pos,
             seq, block_tables, bt_width, block_size, k_pool, v_pool, out, scale, kvs, row_list, part, cnt);
      break;
    default: check(cudaErrorInvalidValue, "attention_gqa (head_dim must be 64 or 128)");
  }
}

template <bool FUSED>
void run_gqa(const float* qkv, int64_t ldq, int rows, int H, int KVH, int D, const float* cos_t, const float* sin_t,
             const int32_t* pos, const int32_t* seq, const int32_t* block_tables, int bt_width, int block_size,
             void* k_pool, void* v_pool, float* out, int nsplit, const int32_t* row_list, float* part, int32_t* cnt,
             cudaStream_t stream, KvFormat kv, int hb) {
  if (rows <= 0) return;
  if (!attention_gqa_supported(H, KVH, D))
    check(cudaErrorInvalidValue, "attention_gqa (H / KVH must be an integer in 1..8, head_dim 64 or 128)");
  const int G = H / KVH;
  if (hb == 0) {  // automatic: one block per query head while the (row, KV head) blocks would not fill the SMs
    hb = static_cast<int64_t>(rows) * KVH < sm_count() ? 1 : G;
  }
  if (hb != 1 && hb != G) check(cudaErrorInvalidValue, "attention_gqa (heads per block must be 0, 1 or H / KVH)");
  if (nsplit < 1 || nsplit > kAttentionMaxSplit || (nsplit > 1 && (!part || !cnt)))
    check(cudaErrorInvalidValue, "attention_gqa (nsplit out of [1, kAttentionMaxSplit], or scratch missing)");
  with_kv_type(kv.elem, [&](auto tag) {
    using KT = decltype(tag);
    launch_gqa<FUSED>(qkv, ldq, rows, H, KVH, D, cos_t, sin_t, pos, seq, block_tables, bt_width, block_size,
                      static_cast<KT*>(k_pool), static_cast<KT*>(v_pool), out, nsplit, row_list, part, cnt, stream,
                      kv.scale, hb);
  });
}

}  // namespace

bool attention_gqa_supported(int H, int KVH, int D) {
  return KVH > 0 && H % KVH == 0 && H / KVH <= 8 && (D == 64 || D == 128);
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
                          float* partial, int32_t* counters, cudaStream_t stream, KvFormat kv, int heads_per_block) {
  run_gqa<true>(qkv, ldq, rows, H, KVH, D, cos_t, sin_t, pos, seq, block_tables, bt_width, block_size, k_pool, v_pool,
                out, nsplit, nullptr, partial, counters, stream, kv, heads_per_block);
}

void attention_gqa(const float* q, int64_t ldq, const int32_t* row_list, int rows, int H, int KVH, int D,
                   const int32_t* pos, const int32_t* seq, const int32_t* block_tables, int bt_width, int block_size,
                   const void* k_pool, const void* v_pool, float* out, int nsplit, float* partial, int32_t* counters,
                   cudaStream_t stream, KvFormat kv, int heads_per_block) {
  run_gqa<false>(q, ldq, rows, H, KVH, D, nullptr, nullptr, pos, seq, block_tables, bt_width, block_size,
                 const_cast<void*>(k_pool), const_cast<void*>(v_pool), out, nsplit, row_list, partial, counters,
                 stream, kv, heads_per_block);
}

}  // namespace tritium::cuda
