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
// attention_prefill_kernel (flash-attention style, f32 arithmetic): one block per (tile of query rows of one sequence
// with consecutive positions, KV head); the tile's rows x the KV head's query heads (64 query vectors) share each
// K/V tile of 32 positions staged in shared memory; online softmax per query vector, causal mask by pos[r].
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cuda/attention_block.cuh"
#include "kernels/cuda/kv_elem.cuh"
#include "kernels/cuda/kernels.h"
#include "kernels/cuda/launch.cuh"

namespace tritium::cuda {
namespace {

/// Throws tritium::Error "CUDA error in <what> (<why>): invalid argument" (through check()).
void fail_arg(const char* what, const char* why) {
  const std::string msg = std::string(what) + " (" + why + ")";
  check(cudaErrorInvalidValue, msg.c_str());
}

template <int D, bool FUSED, bool SPLIT, class KT>
__global__ void __launch_bounds__(256) attention_kernel(const float* __restrict__ q, int64_t ldq, int H, int KVH,
                                                        const int32_t* __restrict__ pos,
                                                        const int32_t* __restrict__ seq,
                                                        const int32_t* __restrict__ bt, int btw, int bs,
                                                        KT* __restrict__ kpool, KT* __restrict__ vpool,
                                                        float* __restrict__ out, float scale,
                                                        const float* __restrict__ cos_t,
                                                        const float* __restrict__ sin_t, int nsplit,
                                                        float* __restrict__ part, int* __restrict__ cnt,
                                                        float kvs) {
  attention_block<D, FUSED, SPLIT, KT>(blockIdx.x, blockIdx.y, blockIdx.z, q, ldq, H, KVH, pos, seq, bt, btw, bs,
                                       kpool, vpool, out, scale, cos_t, sin_t, nsplit, part, cnt, kvs);
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
template <int D, class KT>
__global__ void __launch_bounds__(256) attention_prefill_kernel(
    const float* __restrict__ q, int64_t ldq, int H, int KVH, const int32_t* __restrict__ pos,
    const int32_t* __restrict__ seq, const int32_t* __restrict__ bt, int btw, int bs, const KT* __restrict__ kpool,
    const KT* __restrict__ vpool, float* __restrict__ out, float scale, const int32_t* __restrict__ tiles, float kvs) {
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
        kv4 = KvIO<KT>::load4(kpool + off, kvs);
        vv4 = KvIO<KT>::load4(vpool + off, kvs);
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

/// Opts attention_prefill_kernel<D, KT> in to its dynamic shared memory, once per device (before any graph capture).
template <int D, class KT>
void set_smem_once() {
  constexpr size_t smem = flash_smem_bytes<D>();
  static std::atomic<uint64_t> done{0};  // bit d: set on device d (devices >= 64: every call)
  int dev = 0;
  check(cudaGetDevice(&dev), "cudaGetDevice");
  const uint64_t bit = dev < 64 ? uint64_t{1} << dev : 0;
  if (bit != 0 && (done.load() & bit) != 0) return;
  check(cudaFuncSetAttribute(attention_prefill_kernel<D, KT>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(smem)),
        "attention_prefill smem attribute");
  done.fetch_or(bit);
}

template <bool FUSED, bool SPLIT, class KT>
void launch_attention_t(const char* what, const float* q, int64_t ldq, int rows, int H, int KVH, int D,
                        const float* cos_t, const float* sin_t, const int32_t* pos, const int32_t* seq,
                        const int32_t* block_tables, int bt_width, int block_size, KT* k_pool, KT* v_pool, float* out,
                        int nsplit, float* part, int32_t* cnt, cudaStream_t stream, float kvs) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  const dim3 grid(rows, H, SPLIT ? nsplit : 1);
  switch (D) {
    case 64:
      launch(attention_kernel<64, FUSED, SPLIT, KT>, grid, dim3(256), 0, stream, what, q, ldq, H, KVH, pos, seq,
             block_tables, bt_width, block_size, k_pool, v_pool, out, scale, cos_t, sin_t, nsplit, part, cnt, kvs);
      break;
    case 128:
      launch(attention_kernel<128, FUSED, SPLIT, KT>, grid, dim3(256), 0, stream, what, q, ldq, H, KVH, pos, seq,
             block_tables, bt_width, block_size, k_pool, v_pool, out, scale, cos_t, sin_t, nsplit, part, cnt, kvs);
      break;
    default: fail_arg(what, "head_dim must be 64 or 128");
  }
}

template <bool FUSED, bool SPLIT>
void launch_attention(const char* what, const float* q, int64_t ldq, int rows, int H, int KVH, int D,
                      const float* cos_t, const float* sin_t, const int32_t* pos, const int32_t* seq,
                      const int32_t* block_tables, int bt_width, int block_size, void* k_pool, void* v_pool,
                      float* out, int nsplit, float* part, int32_t* cnt, cudaStream_t stream, KvFormat kv) {
  if (rows <= 0) return;
  if (KVH <= 0 || H % KVH != 0) fail_arg(what, "heads");
  with_kv_type(kv.elem, [&](auto tag) {
    using KT = decltype(tag);
    launch_attention_t<FUSED, SPLIT>(what, q, ldq, rows, H, KVH, D, cos_t, sin_t, pos, seq, block_tables, bt_width,
                                     block_size, static_cast<KT*>(k_pool), static_cast<KT*>(v_pool), out, nsplit, part,
                                     cnt, stream, kv.scale);
  });
}

void check_split(const char* what, int nsplit, const float* part, const int32_t* cnt) {
  if (nsplit < 1 || nsplit > kAttentionMaxSplit) fail_arg(what, "nsplit out of [1, kAttentionMaxSplit]");
  if (nsplit > 1 && (part == nullptr || cnt == nullptr)) fail_arg(what, "scratch (partial, counters) missing");
}

}  // namespace

void attention_paged(const float* q, int64_t ldq, int rows, int H, int KVH, int D, const int32_t* pos,
                     const int32_t* seq, const int32_t* block_tables, int bt_width, int block_size,
                     const void* k_pool, const void* v_pool, float* out, cudaStream_t stream, KvFormat kv) {
  // The unfused kernel does not write the pools.
  launch_attention<false, false>("attention_paged", q, ldq, rows, H, KVH, D, nullptr, nullptr, pos, seq,
                                 block_tables, bt_width, block_size, const_cast<void*>(k_pool),
                                 const_cast<void*>(v_pool), out, 1, nullptr, nullptr, stream, kv);
}

void attention_decode_rope(const float* qkv, int64_t ldq, int rows, int H, int KVH, int D, const float* cos_t,
                           const float* sin_t, const int32_t* pos, const int32_t* seq, const int32_t* block_tables,
                           int bt_width, int block_size, void* k_pool, void* v_pool, float* out,
                           cudaStream_t stream, KvFormat kv) {
  launch_attention<true, false>("attention_decode_rope", qkv, ldq, rows, H, KVH, D, cos_t, sin_t, pos, seq,
                                block_tables, bt_width, block_size, k_pool, v_pool, out, 1, nullptr, nullptr, stream,
                                kv);
}

int attention_split_count(int rows, int H) {
  const int sms = sm_count();
  const int64_t blocks = std::max<int64_t>(1, static_cast<int64_t>(rows) * H);
  return static_cast<int>(std::clamp<int64_t>((2 * sms + blocks - 1) / blocks, 1, kAttentionMaxSplit));
}

void attention_paged_split(const float* q, int64_t ldq, int rows, int H, int KVH, int D, const int32_t* pos,
                           const int32_t* seq, const int32_t* block_tables, int bt_width, int block_size,
                           const void* k_pool, const void* v_pool, float* out, int nsplit, float* partial,
                           int32_t* counters, cudaStream_t stream, KvFormat kv) {
  check_split("attention_paged_split", nsplit, partial, counters);
  if (nsplit == 1) {
    attention_paged(q, ldq, rows, H, KVH, D, pos, seq, block_tables, bt_width, block_size, k_pool, v_pool, out,
                    stream, kv);
    return;
  }
  launch_attention<false, true>("attention_paged_split", q, ldq, rows, H, KVH, D, nullptr, nullptr, pos, seq,
                                block_tables, bt_width, block_size, const_cast<void*>(k_pool),
                                const_cast<void*>(v_pool), out, nsplit, partial, counters, stream, kv);
}

void attention_decode_rope_split(const float* qkv, int64_t ldq, int rows, int H, int KVH, int D, const float* cos_t,
                                 const float* sin_t, const int32_t* pos, const int32_t* seq,
                                 const int32_t* block_tables, int bt_width, int block_size, void* k_pool,
                                 void* v_pool, float* out, int nsplit, float* partial, int32_t* counters,
                                 cudaStream_t stream, KvFormat kv) {
  check_split("attention_decode_rope_split", nsplit, partial, counters);
  if (nsplit == 1) {
    attention_decode_rope(qkv, ldq, rows, H, KVH, D, cos_t, sin_t, pos, seq, block_tables, bt_width, block_size,
                          k_pool, v_pool, out, stream, kv);
    return;
  }
  launch_attention<true, true>("attention_decode_rope_split", qkv, ldq, rows, H, KVH, D, cos_t, sin_t, pos, seq,
                               block_tables, bt_width, block_size, k_pool, v_pool, out, nsplit, partial, counters,
                               stream, kv);
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

namespace {
template <class KT>
void launch_prefill(const float* q, int64_t ldq, int H, int KVH, int D, const int32_t* pos, const int32_t* seq,
                    const int32_t* block_tables, int bt_width, int block_size, const KT* k_pool, const KT* v_pool,
                    float* out, const int32_t* tiles, int ntiles, cudaStream_t stream, float kvs) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  const dim3 grid(ntiles, KVH);
  switch (D) {
    case 64: {
      constexpr size_t smem = flash_smem_bytes<64>();
      set_smem_once<64, KT>();
      launch(attention_prefill_kernel<64, KT>, grid, dim3(256), smem, stream, "attention_prefill", q, ldq, H, KVH,
             pos, seq, block_tables, bt_width, block_size, k_pool, v_pool, out, scale, tiles, kvs);
      break;
    }
    case 128: {
      constexpr size_t smem = flash_smem_bytes<128>();
      set_smem_once<128, KT>();
      launch(attention_prefill_kernel<128, KT>, grid, dim3(256), smem, stream, "attention_prefill", q, ldq, H, KVH,
             pos, seq, block_tables, bt_width, block_size, k_pool, v_pool, out, scale, tiles, kvs);
      break;
    }
    default: fail_arg("attention_prefill", "head_dim must be 64 or 128");
  }
}
}  // namespace

void attention_prefill(const float* q, int64_t ldq, int H, int KVH, int D, const int32_t* pos, const int32_t* seq,
                       const int32_t* block_tables, int bt_width, int block_size, const void* k_pool,
                       const void* v_pool, float* out, const int32_t* tiles, int ntiles, cudaStream_t stream,
                       KvFormat kv) {
  if (ntiles <= 0) return;
  if (attention_prefill_tile_rows(H, KVH) == 0) fail_arg("attention_prefill", "heads (H / KVH must be 1..64)");
  with_kv_type(kv.elem, [&](auto tag) {
    using KT = decltype(tag);
    launch_prefill(q, ldq, H, KVH, D, pos, seq, block_tables, bt_width, block_size, static_cast<const KT*>(k_pool),
                   static_cast<const KT*>(v_pool), out, tiles, ntiles, stream, kv.scale);
  });
}

}  // namespace tritium::cuda
