// tritium kernels/cuda: causal GQA attention over the paged KV cache (decode and prefill rows alike).
//
// One block of 256 threads per (query row, head). The 256 threads form 32 groups of 8 lanes; group j takes
// positions j, j + 32, ... (two per step, loads issued together), each lane D/8 dimensions, and keeps an
// online-softmax state (running max, sum of exponentials, weighted V sum) as in flash-decoding; the 32 states
// are merged at the end. No buffer depends on the context length, so the kernel can be captured in a CUDA
// graph once and replayed for any position.
//
// FUSED (decode rows: each row the only new token of its sequence): the block also applies RoPE to its q head
// and to the row's k head (lanes sub and sub ^ 4 hold the rotate_half partners), takes the new position from
// registers instead of the pool (group 0 adds it last), and the first block of each KV head writes the rotated
// k and v into the pool: rope_kv_write + attention_paged in one kernel.
//
// SPLIT (flash-decoding split-K, for long contexts): the grid gets a third dimension of nsplit chunks; chunk z
// of a (row, head) takes positions [z * chunk, (z + 1) * chunk), chunk = ceil(n / nsplit) rounded up to 64 (so
// the number of active chunks depends on the context only, and the grid can be captured once in a graph).
// Each active block writes its partial state (O unnormalized, max, sum) to scratch; the last block of the
// (row, head) to finish (an atomic counter, reset by that block) merges the partials into out.
//
// attention_prefill_kernel (flash-attention style, f32): one block per (tile of query rows of one sequence with
// consecutive positions, KV head); the tile's rows x the KV head's query heads (64 query vectors) share each
// K/V tile of 32 positions staged in shared memory; online softmax per query vector, causal mask by pos[r].
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cuda/kernels.h"
#include "kernels/cuda/launch.cuh"

namespace tritium::cuda {
namespace {

/// Throws tritium::Error "CUDA error in <what> (<why>): invalid argument" (through check()).
void fail_arg(const char* what, const char* why) {
  const std::string msg = std::string(what) + " (" + why + ")";
  check(cudaErrorInvalidValue, msg.c_str());
}

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

template <int D, bool FUSED, bool SPLIT>
__global__ void __launch_bounds__(256) attention_kernel(const float* __restrict__ q, int64_t ldq, int H, int KVH,
                                                        const int32_t* __restrict__ pos,
                                                        const int32_t* __restrict__ seq,
                                                        const int32_t* __restrict__ bt, int btw, int bs,
                                                        float* __restrict__ kpool, float* __restrict__ vpool,
                                                        float* __restrict__ out, float scale,
                                                        const float* __restrict__ cos_t,
                                                        const float* __restrict__ sin_t, int nsplit,
                                                        float* __restrict__ part, int* __restrict__ cnt) {
  constexpr int DL = D / 8;
  static_assert(DL % 4 == 0, "head_dim must be a multiple of 32");
  __shared__ float m_s[32], l_s[32];
  __shared__ float o_s[32][D];
  __shared__ int is_last;
  const int r = blockIdx.x, h = blockIdx.y;
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
    if (static_cast<int>(blockIdx.z) >= active) {  // nothing to do: writes nothing, reads nothing written
      pdl_trigger();
      return;
    }
    p_begin = static_cast<int>(blockIdx.z) * chunk;
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
  int first_blocks[2];
#pragma unroll
  for (int u = 0; u < 2; ++u) {
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
      const float4 t = qp[i];
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
    for (int i = 0; i < DL; ++i) kc[i] = row[i], vc[i] = row[kvd + i];
    rope(kc);
    if (has_new && h % (H / KVH) == 0 && grp == 0) {
      const int p = n_all - 1;
      const int64_t off = (static_cast<int64_t>(table[p / bs]) * bs + p % bs) * kvd + kvh * D + sub * DL;
#pragma unroll
      for (int i = 0; i < DL; ++i) kpool[off + i] = kc[i], vpool[off + i] = vc[i];
    }
  }
  float m = -INFINITY, l = 0.0f, o[DL];
#pragma unroll
  for (int i = 0; i < DL; ++i) o[i] = 0.0f;

  // The loop bound is uniform over the warp (its first group's start), so every lane reaches the shuffles
  // below; positions past n are masked inside.
  for (int base = p_begin + warp_first; base < n_end; base += 64) {
    const int p0 = base + (grp & 3);
    float4 kv[2][DL / 4], vv[2][DL / 4];
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      const int p = p0 + 32 * u;
      if (p < n_end) {
        const int blk = base == p_begin + warp_first ? first_blocks[u] : table[p / bs];
        const int64_t off = (static_cast<int64_t>(blk) * bs + p % bs) * kvd + kvh * D + sub * DL;
        const float4* kp = reinterpret_cast<const float4*>(kpool + off);
        const float4* vp = reinterpret_cast<const float4*>(vpool + off);
#pragma unroll
        for (int i = 0; i < DL / 4; ++i) kv[u][i] = kp[i], vv[u][i] = vp[i];
      }
    }
#pragma unroll
    for (int u = 0; u < 2; ++u) {
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
    float* pp = part + (rh * nsplit + blockIdx.z) * (D + 2);
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


constexpr int kFlashQ = 64;   // query vectors (rows x query heads of one KV head) per block
constexpr int kFlashK = 32;   // KV positions per shared-memory tile
constexpr int kFlashPS = kFlashK + 4;  // row stride of the probabilities (half-warps hit disjoint banks)

template <int D>
constexpr size_t flash_smem_bytes() {
  return sizeof(float) * (static_cast<size_t>(kFlashQ) * (D + 4) + static_cast<size_t>(kFlashK) * (D + 4) +
                          static_cast<size_t>(kFlashK) * D + static_cast<size_t>(kFlashQ) * kFlashPS);
}

// Thread t: query vectors 4 (t / 16) .. + 3 (the 16 lanes of a half-warp share them), score columns t % 16 and
// t % 16 + 16 of each K/V tile, output dimensions 64 j + 4 (t % 16) .. + 3. Query vector v = position t_v = v / G
// of the tile, head kvh * G + v % G.
template <int D>
__global__ void __launch_bounds__(256) attention_prefill_kernel(
    const float* __restrict__ q, int64_t ldq, int H, int KVH, const int32_t* __restrict__ pos,
    const int32_t* __restrict__ seq, const int32_t* __restrict__ bt, int btw, int bs, const float* __restrict__ kpool,
    const float* __restrict__ vpool, float* __restrict__ out, float scale, const int32_t* __restrict__ tiles) {
  static_assert(D % 64 == 0, "head_dim must be 64 or 128");
  constexpr int QS = D + 4, KS = D + 4, DJ = D / 64;
  extern __shared__ float4 flash_smem[];
  float* Qs = reinterpret_cast<float*>(flash_smem);  // [kFlashQ][QS]
  float* Ks = Qs + kFlashQ * QS;                     // [kFlashK][KS]
  float* Vs = Ks + kFlashK * KS;                     // [kFlashK][D]
  float* Ps = Vs + kFlashK * D;                      // [kFlashQ][kFlashPS]
  const int kvh = blockIdx.y, G = H / KVH, kvd = KVH * D;
  const int r0 = tiles[2 * blockIdx.x], nr = min(tiles[2 * blockIdx.x + 1], kFlashQ / G);
  const int tid = threadIdx.x, qg = tid >> 4, l16 = tid & 15;
  const int32_t* table = bt + static_cast<int64_t>(seq[r0]) * btw;
  int n_kv = 0;  // the tile's keys: positions 0 .. max pos
  for (int t = 0; t < nr; ++t) n_kv = max(n_kv, pos[r0 + t] + 1);
  int qpos[4];  // position of each of this thread's query vectors, -1 for none
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int t = (qg * 4 + i) / G;
    qpos[i] = t < nr ? pos[r0 + t] : -1;
  }
  pdl_trigger();
  pdl_wait();
  for (int idx = tid; idx < kFlashQ * (D / 4); idx += 256) {
    const int v = idx / (D / 4), c4 = idx % (D / 4), t = v / G;
    float4 val = make_float4(0.f, 0.f, 0.f, 0.f);
    if (t < nr)
      val = *reinterpret_cast<const float4*>(q + static_cast<int64_t>(r0 + t) * ldq + (kvh * G + v % G) * D + 4 * c4);
    *reinterpret_cast<float4*>(Qs + v * QS + 4 * c4) = val;
  }
  float m[4], l[4], o[4][DJ][4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    m[i] = -INFINITY, l[i] = 0.0f;
#pragma unroll
    for (int j = 0; j < DJ; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[i][j][e] = 0.0f;
  }
  for (int kt0 = 0; kt0 < n_kv; kt0 += kFlashK) {
    __syncthreads();  // the previous tile's K, V, P are no longer read
    for (int idx = tid; idx < kFlashK * (D / 4); idx += 256) {
      const int p = idx / (D / 4), c4 = idx % (D / 4), kp = kt0 + p;
      float4 kv4 = make_float4(0.f, 0.f, 0.f, 0.f), vv4 = kv4;
      if (kp < n_kv) {
        const int64_t off = (static_cast<int64_t>(table[kp / bs]) * bs + kp % bs) * kvd + kvh * D + 4 * c4;
        kv4 = *reinterpret_cast<const float4*>(kpool + off);
        vv4 = *reinterpret_cast<const float4*>(vpool + off);
      }
      *reinterpret_cast<float4*>(Ks + p * KS + 4 * c4) = kv4;
      *reinterpret_cast<float4*>(Vs + p * D + 4 * c4) = vv4;
    }
    __syncthreads();
    float s[4][2];
#pragma unroll
    for (int i = 0; i < 4; ++i) s[i][0] = s[i][1] = 0.0f;
#pragma unroll 4
    for (int d4 = 0; d4 < D / 4; ++d4) {
      float4 kf[2], qf[4];
#pragma unroll
      for (int c = 0; c < 2; ++c) kf[c] = *reinterpret_cast<const float4*>(Ks + (l16 + 16 * c) * KS + 4 * d4);
#pragma unroll
      for (int i = 0; i < 4; ++i) qf[i] = *reinterpret_cast<const float4*>(Qs + (qg * 4 + i) * QS + 4 * d4);
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int c = 0; c < 2; ++c)
          s[i][c] += qf[i].x * kf[c].x + qf[i].y * kf[c].y + qf[i].z * kf[c].z + qf[i].w * kf[c].w;
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      bool valid[2];
      float mx = -INFINITY;
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        const int kp = kt0 + l16 + 16 * c;
        valid[c] = kp <= qpos[i];  // qpos < n_kv; -1 masks everything
        s[i][c] = valid[c] ? s[i][c] * scale : -INFINITY;
        mx = fmaxf(mx, s[i][c]);
      }
      // The 16 lanes of the half-warp hold the tile's 32 columns of this query vector.
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 8));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 4));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      const float mn = fmaxf(m[i], mx);
      float pe[2], corr = 1.0f;
      if (mn == -INFINITY) {
        pe[0] = pe[1] = 0.0f;
      } else {
        corr = expf(m[i] - mn);
#pragma unroll
        for (int c = 0; c < 2; ++c) pe[c] = valid[c] ? expf(s[i][c] - mn) : 0.0f;
      }
      float ps = pe[0] + pe[1];
      ps += __shfl_xor_sync(0xffffffffu, ps, 8);
      ps += __shfl_xor_sync(0xffffffffu, ps, 4);
      ps += __shfl_xor_sync(0xffffffffu, ps, 2);
      ps += __shfl_xor_sync(0xffffffffu, ps, 1);
      l[i] = l[i] * corr + ps;
      m[i] = mn;
#pragma unroll
      for (int j = 0; j < DJ; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) o[i][j][e] *= corr;
#pragma unroll
      for (int c = 0; c < 2; ++c) Ps[(qg * 4 + i) * kFlashPS + l16 + 16 * c] = pe[c];
    }
    __syncthreads();
#pragma unroll 2
    for (int c4 = 0; c4 < kFlashK / 4; ++c4) {
      float4 pf[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) pf[i] = *reinterpret_cast<const float4*>(Ps + (qg * 4 + i) * kFlashPS + 4 * c4);
#pragma unroll
      for (int cc = 0; cc < 4; ++cc) {
        const float* vrow = Vs + (4 * c4 + cc) * D;
#pragma unroll
        for (int j = 0; j < DJ; ++j) {
          const float4 v4 = *reinterpret_cast<const float4*>(vrow + 64 * j + 4 * l16);
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            const float p = cc == 0 ? pf[i].x : cc == 1 ? pf[i].y : cc == 2 ? pf[i].z : pf[i].w;
            o[i][j][0] += p * v4.x;
            o[i][j][1] += p * v4.y;
            o[i][j][2] += p * v4.z;
            o[i][j][3] += p * v4.w;
          }
        }
      }
    }
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    if (qpos[i] < 0) continue;
    const int v = qg * 4 + i, t = v / G;
    float* dst = out + static_cast<int64_t>(r0 + t) * H * D + (kvh * G + v % G) * D;
    const float inv = 1.0f / l[i];
#pragma unroll
    for (int j = 0; j < DJ; ++j)
      *reinterpret_cast<float4*>(dst + 64 * j + 4 * l16) =
          make_float4(o[i][j][0] * inv, o[i][j][1] * inv, o[i][j][2] * inv, o[i][j][3] * inv);
  }
}

/// Opts attention_prefill_kernel<D> in to its dynamic shared memory, once per device (before any graph capture).
template <int D>
void set_smem_once() {
  constexpr size_t smem = flash_smem_bytes<D>();
  static std::atomic<uint64_t> done{0};  // bit d: set on device d (devices >= 64: every call)
  int dev = 0;
  check(cudaGetDevice(&dev), "cudaGetDevice");
  const uint64_t bit = dev < 64 ? uint64_t{1} << dev : 0;
  if (bit != 0 && (done.load() & bit) != 0) return;
  check(cudaFuncSetAttribute(attention_prefill_kernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(smem)),
        "attention_prefill smem attribute");
  done.fetch_or(bit);
}

template <bool FUSED, bool SPLIT>
void launch_attention(const char* what, const float* q, int64_t ldq, int rows, int H, int KVH, int D,
                      const float* cos_t, const float* sin_t, const int32_t* pos, const int32_t* seq,
                      const int32_t* block_tables, int bt_width, int block_size, float* k_pool, float* v_pool,
                      float* out, int nsplit, float* part, int32_t* cnt, cudaStream_t stream) {
  if (rows <= 0) return;
  if (KVH <= 0 || H % KVH != 0) fail_arg(what, "heads");
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  const dim3 grid(rows, H, SPLIT ? nsplit : 1);
  switch (D) {
    case 64:
      launch(attention_kernel<64, FUSED, SPLIT>, grid, dim3(256), 0, stream, what, q, ldq, H, KVH, pos, seq,
             block_tables, bt_width, block_size, k_pool, v_pool, out, scale, cos_t, sin_t, nsplit, part, cnt);
      break;
    case 128:
      launch(attention_kernel<128, FUSED, SPLIT>, grid, dim3(256), 0, stream, what, q, ldq, H, KVH, pos, seq,
             block_tables, bt_width, block_size, k_pool, v_pool, out, scale, cos_t, sin_t, nsplit, part, cnt);
      break;
    default: fail_arg(what, "head_dim must be 64 or 128");
  }
}

void check_split(const char* what, int nsplit, const float* part, const int32_t* cnt) {
  if (nsplit < 1 || nsplit > kAttentionMaxSplit) fail_arg(what, "nsplit out of [1, kAttentionMaxSplit]");
  if (nsplit > 1 && (part == nullptr || cnt == nullptr)) fail_arg(what, "scratch (partial, counters) missing");
}

}  // namespace

void attention_paged(const float* q, int64_t ldq, int rows, int H, int KVH, int D, const int32_t* pos,
                     const int32_t* seq, const int32_t* block_tables, int bt_width, int block_size,
                     const float* k_pool, const float* v_pool, float* out, cudaStream_t stream) {
  // The unfused kernel does not write the pools.
  launch_attention<false, false>("attention_paged", q, ldq, rows, H, KVH, D, nullptr, nullptr, pos, seq,
                                 block_tables, bt_width, block_size, const_cast<float*>(k_pool),
                                 const_cast<float*>(v_pool), out, 1, nullptr, nullptr, stream);
}

void attention_decode_rope(const float* qkv, int64_t ldq, int rows, int H, int KVH, int D, const float* cos_t,
                           const float* sin_t, const int32_t* pos, const int32_t* seq, const int32_t* block_tables,
                           int bt_width, int block_size, float* k_pool, float* v_pool, float* out,
                           cudaStream_t stream) {
  launch_attention<true, false>("attention_decode_rope", qkv, ldq, rows, H, KVH, D, cos_t, sin_t, pos, seq,
                                block_tables, bt_width, block_size, k_pool, v_pool, out, 1, nullptr, nullptr, stream);
}

int attention_split_count(int rows, int H) {
  int dev = 0, sms = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) !=
                                                 cudaSuccess || sms <= 0) {
    cudaGetLastError();
    sms = 132;
  }
  const int64_t blocks = std::max<int64_t>(1, static_cast<int64_t>(rows) * H);
  return static_cast<int>(std::clamp<int64_t>((2 * sms + blocks - 1) / blocks, 1, kAttentionMaxSplit));
}

void attention_paged_split(const float* q, int64_t ldq, int rows, int H, int KVH, int D, const int32_t* pos,
                           const int32_t* seq, const int32_t* block_tables, int bt_width, int block_size,
                           const float* k_pool, const float* v_pool, float* out, int nsplit, float* partial,
                           int32_t* counters, cudaStream_t stream) {
  check_split("attention_paged_split", nsplit, partial, counters);
  if (nsplit == 1) {
    attention_paged(q, ldq, rows, H, KVH, D, pos, seq, block_tables, bt_width, block_size, k_pool, v_pool, out,
                    stream);
    return;
  }
  launch_attention<false, true>("attention_paged_split", q, ldq, rows, H, KVH, D, nullptr, nullptr, pos, seq,
                                block_tables, bt_width, block_size, const_cast<float*>(k_pool),
                                const_cast<float*>(v_pool), out, nsplit, partial, counters, stream);
}

void attention_decode_rope_split(const float* qkv, int64_t ldq, int rows, int H, int KVH, int D, const float* cos_t,
                                 const float* sin_t, const int32_t* pos, const int32_t* seq,
                                 const int32_t* block_tables, int bt_width, int block_size, float* k_pool,
                                 float* v_pool, float* out, int nsplit, float* partial, int32_t* counters,
                                 cudaStream_t stream) {
  check_split("attention_decode_rope_split", nsplit, partial, counters);
  if (nsplit == 1) {
    attention_decode_rope(qkv, ldq, rows, H, KVH, D, cos_t, sin_t, pos, seq, block_tables, bt_width, block_size,
                          k_pool, v_pool, out, stream);
    return;
  }
  launch_attention<true, true>("attention_decode_rope_split", qkv, ldq, rows, H, KVH, D, cos_t, sin_t, pos, seq,
                               block_tables, bt_width, block_size, k_pool, v_pool, out, nsplit, partial, counters,
                               stream);
}

int attention_prefill_tile_rows(int H, int KVH) {
  if (KVH <= 0 || H % KVH != 0 || H / KVH > kFlashQ) return 0;
  return kFlashQ / (H / KVH);
}

void attention_prefill_tiles(const int32_t* pos, const int32_t* seq, int rows, int tile_rows,
                             std::vector<int32_t>& tiles) {
  tiles.clear();
  if (tile_rows <= 0) fail_arg("attention_prefill_tiles", "tile_rows must be positive");
  int r = 0;
  while (r < rows) {
    int e = r + 1;
    while (e < rows && e - r < tile_rows && seq[e] == seq[r] && pos[e] == pos[e - 1] + 1) ++e;
    tiles.push_back(r);
    tiles.push_back(e - r);
    r = e;
  }
}

void attention_prefill(const float* q, int64_t ldq, int H, int KVH, int D, const int32_t* pos, const int32_t* seq,
                       const int32_t* block_tables, int bt_width, int block_size, const float* k_pool,
                       const float* v_pool, float* out, const int32_t* tiles, int ntiles, cudaStream_t stream) {
  if (ntiles <= 0) return;
  if (attention_prefill_tile_rows(H, KVH) == 0) fail_arg("attention_prefill", "heads (H / KVH must be 1..64)");
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  const dim3 grid(ntiles, KVH);
  switch (D) {
    case 64: {
      constexpr size_t smem = flash_smem_bytes<64>();
      set_smem_once<64>();
      launch(attention_prefill_kernel<64>, grid, dim3(256), smem, stream, "attention_prefill", q, ldq, H, KVH, pos,
             seq, block_tables, bt_width, block_size, k_pool, v_pool, out, scale, tiles);
      break;
    }
    case 128: {
      constexpr size_t smem = flash_smem_bytes<128>();
      set_smem_once<128>();
      launch(attention_prefill_kernel<128>, grid, dim3(256), smem, stream, "attention_prefill", q, ldq, H, KVH, pos,
             seq, block_tables, bt_width, block_size, k_pool, v_pool, out, scale, tiles);
      break;
    }
    default: fail_arg("attention_prefill", "head_dim must be 64 or 128");
  }
}

}  // namespace tritium::cuda
