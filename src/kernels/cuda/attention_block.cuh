// tritium kernels/cuda: the decode/paged attention of one (query row, head, chunk) as a block-level device
// function, the body of attention_kernel (attention.cu: one block per work item). Block of 256 threads; the
// algorithm is described at the top of attention.cu. The row's q and new k / v are read once per block, with
// ld.global.cg (through L2, not L1).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/kv_elem.cuh"
#include "kernels/cuda/launch.cuh"

namespace tritium::cuda {

/// Merges the 32 lane groups' online-softmax states (max m_s, sum l_s, unnormalized output o_s) at column d,
/// relative to the overall max M: returns the merged sum in L and output in O. Empty groups (l == 0) are skipped.
template <int D>
__device__ __forceinline__ void merge_groups(const float* m_s, const float* l_s, const float (*o_s)[D], float M,
                                             int d, float& L, float& O) {
  L = 0.0f;
  O = 0.0f;
  for (int g = 0; g < 32; ++g) {
    if (l_s[g] == 0.0f) continue;
    const float w = expf(m_s[g] - M);
    L += l_s[g] * w;
    O += o_s[g][d] * w;
  }
}

/// One (row r, head h, chunk z) work item of the paged attention; every thread of the 256-thread block calls
/// it with the same arguments. z is ignored without SPLIT. U: positions per 8-lane group in flight per step (the
/// block takes 32 U positions per step). FUSED: RoPE at position pos[r] from the tables cos_t / sin_t. KT: the
/// pools' element (kv_elem.cuh), kvs its fp8 scale; the new position's k and v are rounded to it before they are
/// attended.
template <int D, bool FUSED, bool SPLIT, class KT = float, int U = 2>
__device__ __forceinline__ void attention_block(int r, int h, int z, const float* __restrict__ q, int64_t ldq, int H,
                                                int KVH, const int32_t* __restrict__ pos,
                                                const int32_t* __restrict__ seq, const int32_t* __restrict__ bt,
                                                int btw, int bs, KT* __restrict__ kpool,
                                                KT* __restrict__ vpool, float* __restrict__ out, float scale,
                                                const float* __restrict__ cos_t, const float* __restrict__ sin_t,
                                                int nsplit, float* __restrict__ part, int* __restrict__ cnt,
                                                float kvs) {
  constexpr int DL = D / 8;
  static_assert(DL % 4 == 0, "head_dim must be a multiple of 32");
  __shared__ float m_s[32], l_s[32];
  __shared__ float o_s[32][D];
  __shared__ int is_last;
  const int tid = threadIdx.x, grp = tid / 8, sub = tid % 8;
  const int kvh = h / (H / KVH), kvd = KVH * D;
  // Metadata (positions, block tables) is not written by kernels: read it, and the KV blocks of the first
  // step, before waiting for the previous kernel.
  const int n_all = pos[r] + 1;
  const int n = FUSED ? n_all - 1 : n_all;  // positions read from the pool
  // This block's positions [p_begin, p_end) (all of them without SPLIT), `active` chunks for the (row, head).
  int p_begin = 0, p_end = n_all, active = 1;
  if constexpr (SPLIT) {
    const int chunk = ((n_all + nsplit - 1) / nsplit + 63) / 64 * 64;
    active = (n_all + chunk - 1) / chunk;
    if (z >= active) {  // nothing to do: writes nothing, reads nothing written
      pdl_trigger();
      return;
    }
    p_begin = z * chunk;
    p_end = min(n_all, p_begin + chunk);
  }
  const bool has_new = p_end == n_all;  // FUSED: this block holds the new position (one chunk per row)
  const int n_end = min(p_end, n);      // end of the positions read from the pool
  const int32_t* table = bt + static_cast<int64_t>(seq[r]) * btw;
  const int warp_first = grp & ~3;
  float cs[FUSED ? DL : 1], sn[FUSED ? DL : 1];
  if constexpr (FUSED) {
    const int64_t cb = static_cast<int64_t>(n_all - 1) * (D / 2) + (sub % 4) * DL;
#pragma unroll
    for (int i = 0; i < DL; ++i) cs[i] = cos_t[cb + i], sn[i] = sin_t[cb + i];
  }
  int first_blocks[U];
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int p = p_begin + warp_first + (grp & 3) + 32 * u;
    first_blocks[u] = p < n_end ? table[p / bs] : 0;
  }
  pdl_trigger();
  pdl_wait();
  float qv[DL];
  {
    const float4* qp = reinterpret_cast<const float4*>(q + static_cast<int64_t>(r) * ldq + h * D + sub * DL);
#pragma unroll
    for (int i = 0; i < DL / 4; ++i) {
      const float4 t = __ldcg(qp + i);
      qv[4 * i] = t.x, qv[4 * i + 1] = t.y, qv[4 * i + 2] = t.z, qv[4 * i + 3] = t.w;
    }
  }
  // RoPE (rotate_half, the float operations of rope_kv_write): lanes 0-3 of a group hold the first half.
  auto rope = [&](float (&v)[DL]) {
#pragma unroll
    for (int i = 0; i < DL; ++i) {
      const float other = __shfl_xor_sync(0xffffffffu, v[i], 4);
      v[i] = sub < 4 ? __fsub_rn(__fmul_rn(v[i], cs[i]), __fmul_rn(other, sn[i]))
                     : __fadd_rn(__fmul_rn(v[i], cs[i]), __fmul_rn(other, sn[i]));
    }
  };
  float kc[FUSED ? DL : 1], vc[FUSED ? DL : 1];
  if constexpr (FUSED) {
    rope(qv);
    const float* row = q + static_cast<int64_t>(r) * ldq + H * D + kvh * D + sub * DL;
#pragma unroll
    for (int i = 0; i < DL; ++i) kc[i] = __ldcg(row + i), vc[i] = __ldcg(row + kvd + i);
    rope(kc);
#pragma unroll
    for (int i = 0; i < DL; ++i) kc[i] = KvIO<KT>::round(kc[i], kvs), vc[i] = KvIO<KT>::round(vc[i], kvs);
    if (has_new && h % (H / KVH) == 0 && grp == 0) {
      const int p = n_all - 1;
      const int64_t off = (static_cast<int64_t>(table[p / bs]) * bs + p % bs) * kvd + kvh * D + sub * DL;
#pragma unroll
      for (int i = 0; i < DL; ++i) {
        KvIO<KT>::store(kpool + off + i, kc[i], kvs);
        KvIO<KT>::store(vpool + off + i, vc[i], kvs);
      }
    }
  }
  float m = -INFINITY, l = 0.0f, o[DL];
#pragma unroll
  for (int i = 0; i < DL; ++i) o[i] = 0.0f;

  // The loop bound is uniform over the warp (its first group's start), so every lane reaches the shuffles
  // below; positions past n are masked inside.
  for (int base = p_begin + warp_first; base < n_end; base += 32 * U) {
    const int p0 = base + (grp & 3);
    float4 kv[U][DL / 4], vv[U][DL / 4];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int p = p0 + 32 * u;
      if (p < n_end) {
        const int blk = base == p_begin + warp_first ? first_blocks[u] : table[p / bs];
        const int64_t off = (static_cast<int64_t>(blk) * bs + p % bs) * kvd + kvh * D + sub * DL;
        KvIO<KT>::template load<DL>(kpool + off, kv[u], kvs);
        KvIO<KT>::template load<DL>(vpool + off, vv[u], kvs);
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int p = p0 + 32 * u;
      float s = 0.0f;
      if (p < n_end) {
#pragma unroll
        for (int i = 0; i < DL / 4; ++i)
          s += qv[4 * i] * kv[u][i].x + qv[4 * i + 1] * kv[u][i].y + qv[4 * i + 2] * kv[u][i].z +
               qv[4 * i + 3] * kv[u][i].w;
      }
      s += __shfl_xor_sync(0xffffffffu, s, 1);
      s += __shfl_xor_sync(0xffffffffu, s, 2);
      s += __shfl_xor_sync(0xffffffffu, s, 4);
      if (p < n_end) {
        s *= scale;
        const float mn = fmaxf(m, s);
        const float corr = expf(m - mn), pe = expf(s - mn);
        l = l * corr + pe;
#pragma unroll
        for (int i = 0; i < DL / 4; ++i) {
          o[4 * i] = o[4 * i] * corr + pe * vv[u][i].x;
          o[4 * i + 1] = o[4 * i + 1] * corr + pe * vv[u][i].y;
          o[4 * i + 2] = o[4 * i + 2] * corr + pe * vv[u][i].z;
          o[4 * i + 3] = o[4 * i + 3] * corr + pe * vv[u][i].w;
        }
        m = mn;
      }
    }
  }
  if constexpr (FUSED) {
    if (has_new) {  // the new position, from registers, in group 0's state (uniform over the block)
      float sc = 0.0f;
#pragma unroll
      for (int i = 0; i < DL; ++i) sc += qv[i] * kc[i];
      sc += __shfl_xor_sync(0xffffffffu, sc, 1);
      sc += __shfl_xor_sync(0xffffffffu, sc, 2);
      sc += __shfl_xor_sync(0xffffffffu, sc, 4);
      if (grp == 0) {
        sc *= scale;
        const float mn = fmaxf(m, sc);
        const float corr = expf(m - mn), pe = expf(sc - mn);
        l = l * corr + pe;
#pragma unroll
        for (int i = 0; i < DL; ++i) o[i] = o[i] * corr + pe * vc[i];
        m = mn;
      }
    }
  }
  if (sub == 0) m_s[grp] = m, l_s[grp] = l;
#pragma unroll
  for (int i = 0; i < DL; ++i) o_s[grp][sub * DL + i] = o[i];
  __syncthreads();
  float M = -INFINITY;
  for (int g = 0; g < 32; ++g) M = fmaxf(M, m_s[g]);
  if (SPLIT && active > 1) {
    // Partial state of this chunk: O (relative to M) [D], M, L.
    const int64_t rh = static_cast<int64_t>(r) * H + h;
    float* pp = part + (rh * nsplit + z) * (D + 2);
    for (int d = tid; d < D; d += 256) {
      float L, O;
      merge_groups<D>(m_s, l_s, o_s, M, d, L, O);
      pp[d] = O;
      if (d == 0) pp[D] = M, pp[D + 1] = L;
    }
    __threadfence();
    __syncthreads();
    if (tid == 0) is_last = atomicAdd(&cnt[rh], 1) == active - 1;
    __syncthreads();
    if (!is_last) return;
    __threadfence();
    const float* pb = part + rh * nsplit * (D + 2);
    float MM = -INFINITY;
    for (int j = 0; j < active; ++j) MM = fmaxf(MM, __ldcg(pb + j * (D + 2) + D));
    for (int d = tid; d < D; d += 256) {
      float L = 0.0f, O = 0.0f;
      for (int j = 0; j < active; ++j) {
        const float w = expf(__ldcg(pb + j * (D + 2) + D) - MM);
        L += __ldcg(pb + j * (D + 2) + D + 1) * w;
        O += __ldcg(pb + j * (D + 2) + d) * w;
      }
      out[static_cast<int64_t>(r) * H * D + h * D + d] = O / L;
    }
    if (tid == 0) cnt[rh] = 0;  // ready for the next launch (graph replay)
    return;
  }
  for (int d = tid; d < D; d += 256) {
    float L, O;
    merge_groups<D>(m_s, l_s, o_s, M, d, L, O);
    out[static_cast<int64_t>(r) * H * D + h * D + d] = O / L;
  }
}

}  // namespace tritium::cuda
