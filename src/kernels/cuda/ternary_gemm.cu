// tritium kernels/cuda: the pipelined ternary (tc2) x int8 GEMM on the int8 tensor cores (mma.sync m16n8k32),
// the kernel of ternary_matmul for rows of more than 16 tokens: batched decode (17-256 sequences) and prefill.
//
// Block: 8 warps, a tile of BN = 128 weight rows x BM = 64 tokens; warp (wm, wn) takes tokens 32 wm .. + 31 and rows
// 32 wn .. + 31 (2 x 4 MMA tiles). K runs in stages of 128 (two 64-wide chunks); each stage's activation tile
// [64][128] and weight tile [128][8 words] go to shared memory through cp.async, five stages in flight. A weight
// word is decoded once per warp and used for its 32 tokens; an activation tile is read from L2 once per 128 rows.
// Decode batches have few token tiles, so the K dimension is also split over a thread-block cluster of S blocks
// (grid z): each block multiplies its share of the stages, the partial sums meet through distributed shared memory
// (block z adds up the S partials of tokens z BM / S .. and applies the epilogue), so the sums stay exact int32.
//
// Operands of one m16n8k32 MMA (k in natural order): the activation fragment comes from one ldmatrix.x4 (matrices:
// tokens 0-7 / 8-15 x k 0-15, then the same tokens x k 16-31), so thread (g, t) holds bytes k 4t .. 4t + 3 and
// 16 + 4t .. of tokens g and g + 8 in the registers the MMA reads, with no register moves. The matching weights are
// code group t of the two tc2 words of the 32 k ((word >> 2t) & 0x03030303: k 16 w + 4t .. + 3): each thread reads
// the four words of its weight row's 64-wide chunk with one 16-byte load and decodes its own group of each. Codes
// c = w + 1 in {0, 1, 2} are multiplied as signed bytes and the row sum of the activations is subtracted at the end:
// sum_k w x = sum_k c x - sum_k x, exact in int32.
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "kernels/cuda/kernels.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/tc2_ops.cuh"
#include "kernels/cuda/ternary_gemm.cuh"

namespace tritium::cuda {
namespace {

namespace cg = cooperative_groups;

constexpr int kStages = 6;  // 5 stages in flight, 92.2 KB: two blocks per SM
constexpr int kBM = 64, kBN = 128, kThreads = 256;
constexpr int kStageK = 128;   // k per stage: two 64-wide chunks
constexpr int kXStride = 144;  // bytes per token row of an activation tile: 128 + 16, so the 8 rows of 16 bytes an
                               // ldmatrix phase reads fall in 8 different groups of 4 banks
constexpr int kWStride = 12;   // words per weight row of a weight tile: 8 + 4, so the 16-byte reads of rows g and
                               // g + 1 (one phase) fall in different banks
constexpr int kXBytes = kBM * kXStride, kWBytes = kBN * kWStride * 4, kStageBytes = kXBytes + kWBytes;
constexpr int kRS = kBN + 8;   // row stride (ints) of the block's partial sums
constexpr int kSmem = kStages * kStageBytes;
static_assert(kBM * kRS * 4 <= kSmem, "the partial sums reuse the pipeline's shared memory");
constexpr int kMaxSplit = 8;  // blocks of a cluster (the portable limit)

__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, bool valid) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  const int bytes = valid ? 16 : 0;  // 0: the 16 bytes are zero-filled, nothing is read
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(bytes) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// Four 8 x 16-byte matrices of shared memory: lanes 8i .. 8i + 7 give the row addresses of matrix i, thread
// (g, t) receives bytes 4t .. 4t + 3 of row g of each.
__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], const void* p) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(s)
               : "memory");
}

// Stores tokens mm_begin .. + count - 1 (of the tile at m0) x the tile's 128 rows at n0 through the epilogue:
// sum(mm, rr) gives the int32 sums of rows rr .. rr + 3 of token mm. Each thread takes 4 groups of 4 rows at a time
// and issues all their loads (sums, sumq, inv_s, the residual) before its first store, so a thread waits on one
// round trip per 16 outputs instead of one per output; the values are store_result's (epilogue_value).
// after_loads() runs once per pass of 4 x 256 groups, between its loads and its stores.
template <class Sum, class AfterLoads>
__device__ __forceinline__ void store_tile(const Epi& ep, int n, int M, int m0, int mm_begin, int count, int n0,
                                           const int32_t* __restrict__ sumq, const float* __restrict__ inv_s,
                                           Sum sum, AfterLoads after_loads) {
  constexpr int kGroups = kBN / 4, kU = 4;
  const bool vec = ep.acc_out == nullptr && ep.ldy % 4 == 0 && (reinterpret_cast<uintptr_t>(ep.y) & 15) == 0;
  for (int base = 0; base < count * kGroups; base += kU * kThreads) {
    int4 v[kU];
    float4 old[kU];
    int sq[kU];
    float is[kU];
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const int i = base + u * kThreads + static_cast<int>(threadIdx.x), mm = mm_begin + i / kGroups,
                rr = 4 * (i % kGroups), m = m0 + mm, row = n0 + rr;
      if (i >= count * kGroups || m >= M || row >= n) continue;
      v[u] = sum(mm, rr);
      sq[u] = sumq[m];
      is[u] = ep.acc_out ? 0.f : inv_s[m];
      if (vec && ep.add && row + 3 < n)
        old[u] = *reinterpret_cast<const float4*>(ep.y + static_cast<int64_t>(m) * ep.ldy + row);
    }
    after_loads();
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const int i = base + u * kThreads + static_cast<int>(threadIdx.x), mm = mm_begin + i / kGroups,
                rr = 4 * (i % kGroups), m = m0 + mm, row = n0 + rr;
      if (i >= count * kGroups || m >= M || row >= n) continue;
      const int e[4] = {v[u].x - sq[u], v[u].y - sq[u], v[u].z - sq[u], v[u].w - sq[u]};
      if (!vec || row + 3 >= n) {  // integer mode, an unaligned output or the last rows of the matrix
        for (int q = 0; q < 4 && row + q < n; ++q) store_result(ep, n, m, row + q, e[q], is[u]);
        continue;
      }
      float4 r = make_float4(epilogue_value(ep, row, e[0], is[u]), epilogue_value(ep, row + 1, e[1], is[u]),
                             epilogue_value(ep, row + 2, e[2], is[u]), epilogue_value(ep, row + 3, e[3], is[u]));
      if (ep.add)
        r = make_float4(__fadd_rn(old[u].x, r.x), __fadd_rn(old[u].y, r.y), __fadd_rn(old[u].z, r.z),
                        __fadd_rn(old[u].w, r.w));
      *reinterpret_cast<float4*>(ep.y + static_cast<int64_t>(m) * ep.ldy + row) = r;
    }
  }
}

__global__ void __launch_bounds__(kThreads) tc2_tiled_gemm_kernel(const uint32_t* __restrict__ w, int n, int np,
                                                                   int nch,
                                                                   const int8_t* __restrict__ xq, int M,
                                                                   const int32_t* __restrict__ sumq,
                                                                   const float* __restrict__ inv_s, Epi ep) {
  extern __shared__ __align__(16) unsigned char smem[];
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const int wm = warp >> 2, wn = warp & 3;
  const int m0 = blockIdx.y * kBM, n0 = blockIdx.x * kBN;
  const int64_t kw = static_cast<int64_t>(nch) * 4;  // words per weight row
  const int64_t kp = static_cast<int64_t>(nch) * 64;
  // This block's stages of the cluster's K split.
  const int S = gridDim.z, nst_all = (nch + 1) / 2, per = (nst_all + S - 1) / S;
  const int s_begin = min(nst_all, static_cast<int>(blockIdx.z) * per), s_end = min(nst_all, s_begin + per);
  const int nst = s_end - s_begin;

  // A weight tile: 128 rows x 2 pieces of 16 bytes (one 64-wide chunk each); chunks past the row and rows past the
  // padded ones (np, a multiple of 64) are zero-filled.
  auto load_w = [&](int s, int buf) {
    uint32_t* ws = reinterpret_cast<uint32_t*>(smem + buf * kStageBytes + kXBytes);
    const int r = tid >> 1, p = tid & 1, c = 2 * s + p;
    const bool ok = c < nch && n0 + r < np;
    cp_async16(ws + r * kWStride + 4 * p, ok ? w + (n0 + r) * kw + 4 * c : w, ok);
  };
  // An activation tile: 64 token rows x 8 pieces of 16 bytes; tokens past M and k past kp are zero-filled.
  auto load_x = [&](int s, int buf) {
    unsigned char* xs = smem + buf * kStageBytes;
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int i = tid + j * kThreads, r = i >> 3, p = i & 7;
      const int64_t k = static_cast<int64_t>(s) * kStageK + 16 * p;
      const bool ok = m0 + r < M && k < kp;
      cp_async16(xs + r * kXStride + 16 * p, ok ? xq + (m0 + r) * kp + k : xq, ok);
    }
  };

  // Weights are constant: the first stages' tiles are requested before waiting for the previous kernel.
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s)
    if (s < nst) load_w(s_begin + s, s);
  pdl_trigger();
  pdl_wait();
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < nst) load_x(s_begin + s, s);
    cp_async_commit();  // group s: stage s (group 0 also holds the early weight tiles)
  }

  int acc[2][4][4];
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0;

  for (int it = 0; it < nst; ++it) {
    cp_async_wait<kStages - 2>();  // stage it has landed (for this thread's copies) ...
    __syncthreads();               // ... for every thread's, and stage it - 1's buffer is free
    {
      const int nx = it + kStages - 1;
      if (nx < nst) {
        load_w(s_begin + nx, nx % kStages);
        load_x(s_begin + nx, nx % kStages);
      }
      cp_async_commit();
    }
    // This lane's ldmatrix row: token 32 wm + (lane & 7) + 8 (matrix & 1), bytes 16 (matrix >> 1) of the 32 k.
    const unsigned char* xs = smem + (it % kStages) * kStageBytes +
                              (32 * wm + (lane & 7) + 8 * ((lane >> 3) & 1)) * kXStride + 16 * (lane >> 4);
    const uint32_t* ws = reinterpret_cast<const uint32_t*>(smem + (it % kStages) * kStageBytes + kXBytes) +
                         (32 * wn + g) * kWStride;
#pragma unroll
    for (int c = 0; c < 2; ++c) {
      if (2 * (s_begin + it) + c >= nch) break;  // the row's last chunk (uniform over the block)
      uint4 wd[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) wd[j] = *reinterpret_cast<const uint4*>(ws + 8 * j * kWStride + 4 * c);
#pragma unroll
      for (int h = 0; h < 2; ++h) {  // k 32 h .. 32 h + 31 of the chunk: words 2h and 2h + 1
        uint32_t a[2][4];
#pragma unroll
        for (int i = 0; i < 2; ++i) ldsm_x4(a[i], xs + 16 * i * kXStride + 64 * c + 32 * h);
        uint32_t b[4][2];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          b[j][0] = ((h ? wd[j].z : wd[j].x) >> (2 * t)) & kTc2Mask;
          b[j][1] = ((h ? wd[j].w : wd[j].y) >> (2 * t)) & kTc2Mask;
        }
#pragma unroll
        for (int i = 0; i < 2; ++i)
#pragma unroll
          for (int j = 0; j < 4; ++j) mma_s8(acc[i][j], a[i][0], a[i][1], a[i][2], a[i][3], b[j][0], b[j][1]);
      }
    }
  }
  cp_async_wait<0>();
  __syncthreads();  // the pipeline buffers are no longer read: the partial sums go there
  int* red = reinterpret_cast<int*>(smem);  // [kBM][kRS]
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int m = 32 * wm + 16 * i + g + (e >= 2 ? 8 : 0), r = 32 * wn + 8 * j + 2 * t + (e & 1);
        red[m * kRS + r] = acc[i][j][e];
      }
  if (S == 1) {
    __syncthreads();
    store_tile(ep, n, M, m0, 0, kBM, n0, sumq, inv_s, [&](int mm, int rr) {
      return *reinterpret_cast<const int4*>(red + mm * kRS + rr);
    }, [] {});
    return;
  }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // Split K: block z of the cluster adds up the S partial tiles over its tokens (in block order) and stores them.
  cg::cluster_group cluster = cg::this_cluster();
  cluster.sync();
  const int rows_per = kBM / S;
  store_tile(ep, n, M, m0, static_cast<int>(blockIdx.z) * rows_per, rows_per, n0, sumq, inv_s, [&](int mm, int rr) {
    int4 v = make_int4(0, 0, 0, 0);
#pragma unroll
    for (int j = 0; j < kMaxSplit; ++j) {
      if (j >= S) break;
      const int4 p = *reinterpret_cast<const int4*>(cluster.map_shared_rank(red, j) + mm * kRS + rr);
      v.x += p.x;
      v.y += p.y;
      v.z += p.z;
      v.w += p.w;
    }
    return v;
  }, [] {
    // A block's tokens (BM / S <= 32) x 32 groups take one pass, so every thread arrives exactly once, after its
    // last read of the other blocks' shared memory (release orders those reads) and before its global stores, which
    // the exit barrier then does not wait for.
    asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory");
  });
  // No block leaves while another still reads its shared memory.
  asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
#else
  // Thread-block clusters exist from sm_90 on; the host launches a K split only there (tiled_gemm_split_for).
  __trap();
#endif
}

}  // namespace

bool tiled_gemm_supported() {
  static std::atomic<int> known[64];  // per device: 0 not asked yet, 1 no, 2 yes
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) {
    cudaGetLastError();
    return false;
  }
  int k = known[dev].load(std::memory_order_relaxed);
  if (k == 0) {
    int major = 0;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess) cudaGetLastError();
    k = major >= 9 ? 2 : 1;
    known[dev].store(k, std::memory_order_relaxed);
  }
  return k == 2;
}

int tiled_gemm_split_for(int np, int M, int kp) {
  const int sms = sm_count();
  const int64_t blocks = static_cast<int64_t>((np + kBN - 1) / kBN) * ((M + kBM - 1) / kBM);
  const int stages = (kp / 64 + 1) / 2;
  // Double the split while the blocks do not yet fill the SMs and each block keeps at least 4 stages after it.
  int S = 1;
  while (S < kMaxSplit && blocks * S < sms && stages >= 8 * S) S *= 2;
  return S;
}

void launch_tc2_tiled_gemm(const uint32_t* w, int n, int np, int kp, const int8_t* xq, const int32_t* sumq,
                           const float* inv_s, int M, const Epi& ep, cudaStream_t st, int split, bool pdl) {
  if (!tiled_gemm_supported()) check(cudaErrorInvalidValue, "ternary_matmul (tiled GEMM needs sm_90)");
  if (split == 0) split = tiled_gemm_split_for(np, M, kp);
  if (split != 1 && split != 2 && split != 4 && split != 8)
    check(cudaErrorInvalidValue, "ternary_matmul (tiled GEMM: K split of 1, 2, 4 or 8 blocks)");
  static bool smem_set = false;  // the opt-in shared-memory limit (set before any capture)
  if (!smem_set) {
    check(cudaFuncSetAttribute(tc2_tiled_gemm_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem),
          "ternary tiled GEMM smem attribute");
    smem_set = true;
  }
  cudaLaunchAttribute attr[2];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = 1;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = static_cast<unsigned>(split);
  attr[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[1].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3((np + kBN - 1) / kBN, (M + kBM - 1) / kBM, split);
  cfg.blockDim = dim3(kThreads);
  cfg.dynamicSmemBytes = kSmem;
  cfg.stream = st;
  cfg.attrs = attr;
  cfg.numAttrs = (pdl && st != nullptr && dependent_launch()) ? 2 : 1;
  check(cudaLaunchKernelEx(&cfg, tc2_tiled_gemm_kernel, w, n, np, kp / 64, xq, M, sumq, inv_s, ep),
        "ternary tiled GEMM");
}

}  // namespace tritium::cuda
