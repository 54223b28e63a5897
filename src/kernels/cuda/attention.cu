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
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "kernels/cuda/kernels.h"
#include "kernels/cuda/launch.cuh"

namespace tritium::cuda {
namespace {

template <int D, bool FUSED>
__global__ void __launch_bounds__(256) attention_kernel(const float* __restrict__ q, int64_t ldq, int H, int KVH,
                                                        const int32_t* __restrict__ pos,
                                                        const int32_t* __restrict__ seq,
                                                        const int32_t* __restrict__ bt, int btw, int bs,
                                                        float* __restrict__ kpool, float* __restrict__ vpool,
                                                        float* __restrict__ out, float scale,
                                                        const float* __restrict__ cos_t,
                                                        const float* __restrict__ sin_t) {
  constexpr int DL = D / 8;
  static_assert(DL % 4 == 0, "head_dim must be a multiple of 32");
  __shared__ float m_s[32], l_s[32];
  __shared__ float o_s[32][D];
  const int r = blockIdx.x, h = blockIdx.y;
  const int tid = threadIdx.x, grp = tid / 8, sub = tid % 8;
  const int kvh = h / (H / KVH), kvd = KVH * D;
  // Metadata (positions, block tables) is not written by kernels: read it, and the KV blocks of the first
  // step, before waiting for the previous kernel.
  const int n_all = pos[r] + 1;
  const int n = FUSED ? n_all - 1 : n_all;  // positions read from the pool
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
    const int p = warp_first + (grp & 3) + 32 * u;
    first_blocks[u] = p < n ? table[p / bs] : 0;
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
    if (h % (H / KVH) == 0 && grp == 0) {
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
  for (int base = warp_first; base < n; base += 64) {
    const int p0 = base + (grp & 3);
    float4 kv[2][DL / 4], vv[2][DL / 4];
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      const int p = p0 + 32 * u;
      if (p < n) {
        const int blk = base == warp_first ? first_blocks[u] : table[p / bs];
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
      if (p < n) {
#pragma unroll
        for (int i = 0; i < DL / 4; ++i)
          s += qv[4 * i] * kv[u][i].x + qv[4 * i + 1] * kv[u][i].y + qv[4 * i + 2] * kv[u][i].z +
               qv[4 * i + 3] * kv[u][i].w;
      }
      s += __shfl_xor_sync(0xffffffffu, s, 1);
      s += __shfl_xor_sync(0xffffffffu, s, 2);
      s += __shfl_xor_sync(0xffffffffu, s, 4);
      if (p < n) {
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
  if constexpr (FUSED) {  // the new position, from registers, in group 0's state
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
  if (sub == 0) m_s[grp] = m, l_s[grp] = l;
#pragma unroll
  for (int i = 0; i < DL; ++i) o_s[grp][sub * DL + i] = o[i];
  __syncthreads();
  float M = -INFINITY;
  for (int g = 0; g < 32; ++g) M = fmaxf(M, m_s[g]);
  for (int d = tid; d < D; d += 256) {
    float L = 0.0f, O = 0.0f;
    for (int g = 0; g < 32; ++g) {
      if (l_s[g] == 0.0f) continue;
      const float w = expf(m_s[g] - M);
      L += l_s[g] * w;
      O += o_s[g][d] * w;
    }
    out[static_cast<int64_t>(r) * H * D + h * D + d] = O / L;
  }
}

}  // namespace

void attention_paged(const float* q, int64_t ldq, int rows, int H, int KVH, int D, const int32_t* pos,
                     const int32_t* seq, const int32_t* block_tables, int bt_width, int block_size,
                     const float* k_pool, const float* v_pool, float* out, cudaStream_t stream) {
  if (rows <= 0) return;
  if (KVH <= 0 || H % KVH != 0) check(cudaErrorInvalidValue, "attention_paged (heads)");
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  dim3 grid(rows, H);
  float* kw = const_cast<float*>(k_pool);  // not written by the unfused kernel
  float* vw = const_cast<float*>(v_pool);
  const float* nf = nullptr;
  switch (D) {
    case 64:
      launch(attention_kernel<64, false>, grid, dim3(256), 0, stream, "attention_paged", q, ldq, H, KVH, pos, seq,
             block_tables, bt_width, block_size, kw, vw, out, scale, nf, nf);
      break;
    case 128:
      launch(attention_kernel<128, false>, grid, dim3(256), 0, stream, "attention_paged", q, ldq, H, KVH, pos, seq,
             block_tables, bt_width, block_size, kw, vw, out, scale, nf, nf);
      break;
    default: check(cudaErrorInvalidValue, "attention_paged (head_dim must be 64 or 128)");
  }
}

void attention_decode_rope(const float* qkv, int64_t ldq, int rows, int H, int KVH, int D, const float* cos_t,
                           const float* sin_t, const int32_t* pos, const int32_t* seq, const int32_t* block_tables,
                           int bt_width, int block_size, float* k_pool, float* v_pool, float* out,
                           cudaStream_t stream) {
  if (rows <= 0) return;
  if (KVH <= 0 || H % KVH != 0) check(cudaErrorInvalidValue, "attention_decode_rope (heads)");
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  dim3 grid(rows, H);
  switch (D) {
    case 64:
      launch(attention_kernel<64, true>, grid, dim3(256), 0, stream, "attention_decode_rope", qkv, ldq, H, KVH, pos,
             seq, block_tables, bt_width, block_size, k_pool, v_pool, out, scale, cos_t, sin_t);
      break;
    case 128:
      launch(attention_kernel<128, true>, grid, dim3(256), 0, stream, "attention_decode_rope", qkv, ldq, H, KVH,
             pos, seq, block_tables, bt_width, block_size, k_pool, v_pool, out, scale, cos_t, sin_t);
      break;
    default: check(cudaErrorInvalidValue, "attention_decode_rope (head_dim must be 64 or 128)");
  }
}

}  // namespace tritium::cuda
