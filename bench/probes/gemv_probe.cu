// GEMV probe (issue #4, session 4; bench/CUDA_NOTES.md version 11): what bounds the one-token ternary GEMV in the
// issue's method (GPU time of 100 launches captured in a CUDA graph), and the binary-MMA GEMV on bit planes.
// Standalone, not part of the build: nvcc -O3 -arch=sm_90a -std=c++20 -Isrc -o gemv_probe bench/probes/gemv_probe.cu
// Usage: gemv_probe [reps] [name filter] [once]   ("once": one checked launch per variant, for ncu).
// Measures, cold (weights rotated over >= 512 MB of copies) and hot, on the 2B4T shapes:
//   empty / read - a kernel with the GEMV's grid that does nothing / only loads the weights (the floors)
//   base / var   - the shipped tc2 dp4a GEMV's algorithm, and variants of where the activations come from
//   tcb          - the bit-plane GEMV on the binary tensor cores (mma m16n8k256 b1), a minimal kernel
//   product      - the library's tcb_matmul (src/kernels/cuda/ternary_tcb.cu, included below) on the same data
// Every GEMV variant's int32 sums are checked against a host reference before it is timed. (The persistent-grid
// and TMA variants of the first run were removed after it.)
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

// The product's tcb kernel (src/kernels/cuda/ternary_tcb.cu), built into this probe for a same-machine A/B;
// the two host helpers it needs from the library, minimal here.
#include "kernels/cuda/ternary_tcb.cu"
namespace tritium::cuda {
void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}
bool dependent_launch() { return false; }
}  // namespace tritium::cuda

#include "probe_check.cuh"

constexpr uint32_t kMask = 0x03030303u;
__device__ __forceinline__ int dp4a_us(uint32_t a, int b, int c) {
  int d;
  asm("dp4a.u32.s32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}
// 64 weights of one 16-byte piece against the matching 64 activations (4 uint4 of x: q = 0..3).
__device__ __forceinline__ void piece_dot(const uint4& wv, const uint4* xq4, int (&acc)[4]) {
  const uint32_t words[4] = {wv.x, wv.y, wv.z, wv.w};
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    const uint4 xv = xq4[q];
    acc[0] = dp4a_us(words[q] & kMask, static_cast<int>(xv.x), acc[0]);
    acc[1] = dp4a_us(words[q] & (kMask << 2), static_cast<int>(xv.y), acc[1]);
    acc[2] = dp4a_us(words[q] & (kMask << 4), static_cast<int>(xv.z), acc[2]);
    acc[3] = dp4a_us(words[q] & (kMask << 6), static_cast<int>(xv.w), acc[3]);
  }
}
__device__ __forceinline__ int combine(const int (&a)[4]) { return a[0] + (a[1] >> 2) + (a[2] >> 4) + (a[3] >> 6); }

// x staged as [q][chunk] uint4 (conflict-free for LPR lanes reading consecutive chunks).
__device__ __forceinline__ void stage_x(const int8_t* xq, int nch, uint4* xs) {
  const uint4* xg = reinterpret_cast<const uint4*>(xq);
  for (int i = threadIdx.x; i < nch * 4; i += blockDim.x) xs[(i & 3) * nch + (i >> 2)] = xg[i];
  __syncthreads();
}

__global__ void empty_kernel(int* out) {
  if (blockIdx.x == 0x7fffffff) out[0] = 1;
}

template <int LPR, int U, int WARPS>
__global__ void __launch_bounds__(WARPS * 32) read_kernel(const uint4* __restrict__ w, int n, int nch, int* out) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int row = (blockIdx.x * WARPS + warp) * (32 / LPR) + lane / LPR, sub = lane % LPR;
  const uint4* wr = w + static_cast<int64_t>(row) * nch;
  uint32_t h = 0;
  for (int c0 = sub; c0 < nch; c0 += LPR * U) {
    uint4 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) v[u] = c0 + u * LPR < nch ? __ldg(wr + c0 + u * LPR) : make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int u = 0; u < U; ++u) h ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  if (h == 0x9e3779b9u) out[row] = 1;
}

// The shipped algorithm at M = 1 (XMODE 0: x staged in shared memory after the weight loads; the "base" rows)
// and its variants:
// 1: x's staging loads issued before the weight loads; 2: no staging, each piece's 64 activations read with __ldg
// (L1) right before use.
template <int LPR, int U, int WARPS, int XMODE>
__global__ void __launch_bounds__(WARPS * 32) var_kernel(const uint4* __restrict__ w, int n, int nch,
                                                         const int8_t* __restrict__ xq, int* __restrict__ out) {
  extern __shared__ uint4 xs[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int row = (blockIdx.x * WARPS + warp) * (32 / LPR) + lane / LPR, sub = lane % LPR;
  const uint4* wr = w + static_cast<int64_t>(row) * nch;
  const uint4* xg = reinterpret_cast<const uint4*>(xq);
  constexpr int XPT = 4;  // staging loads per thread (nch * 4 <= XPT * blockDim)
  uint4 xr[XPT];
  if (XMODE == 1) {
#pragma unroll
    for (int j = 0; j < XPT; ++j) {
      const int i = threadIdx.x + j * WARPS * 32;
      if (i < nch * 4) xr[j] = __ldg(xg + i);
    }
  }
  uint4 wv[U];
#pragma unroll
  for (int u = 0; u < U; ++u) wv[u] = sub + u * LPR < nch ? __ldg(wr + sub + u * LPR) : make_uint4(0, 0, 0, 0);
  if (XMODE == 0) stage_x(xq, nch, xs);
  if (XMODE == 1) {
#pragma unroll
    for (int j = 0; j < XPT; ++j) {
      const int i = threadIdx.x + j * WARPS * 32;
      if (i < nch * 4) xs[(i & 3) * nch + (i >> 2)] = xr[j];
    }
    __syncthreads();
  }
  int acc[4] = {0, 0, 0, 0};
  for (int c0 = sub; c0 < nch; c0 += LPR * U) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int c = c0 + u * LPR;
      if (c >= nch) break;
      if (XMODE == 2) {
        const uint4 xv[4] = {__ldg(xg + 4 * c), __ldg(xg + 4 * c + 1), __ldg(xg + 4 * c + 2), __ldg(xg + 4 * c + 3)};
        piece_dot(wv[u], xv, acc);
      } else {
        const uint4 xv[4] = {xs[c], xs[nch + c], xs[2 * nch + c], xs[3 * nch + c]};
        piece_dot(wv[u], xv, acc);
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int c = c0 + LPR * U + u * LPR;
      wv[u] = c < nch ? __ldg(wr + c) : make_uint4(0, 0, 0, 0);
    }
  }
  int s = combine(acc);
#pragma unroll
  for (int off = LPR / 2; off > 0; off /= 2) s += __shfl_xor_sync(0xffffffffu, s, off);
  if (row < n && sub == 0) out[row] = s;
}

// Bit-plane layout (tcb): per 16-row tile and 256-k chunk, the plane P (w == +1) and the plane N (w == -1) as the
// A fragments of mma.m16n8k256 b1 (lane (g, t): rows g / g + 8, k 32t.. and 128 + 32t.., bit i = k + i), stored
// [tile][chunk][plane][lane] uint4. The activations enter as their 8 two's-complement bit planes, one per MMA
// column n (B fragment: lane (g, t) holds plane g at k 32t.. and 128 + 32t..), stored [lane][chunk][2] uint32.
// D[row][n] = popc(W & X_n) summed over k, so sum_k w x = sum_n s_n 2^n (D_P - D_N), s_7 = -1: no code
// extraction at all, and every MMA column does useful work at one token.
__device__ __forceinline__ void bmma(int (&d)[4], const uint4& a, uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k256.row.col.s32.b1.b1.s32.and.popc {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
      : "r"(a.x), "r"(a.y), "r"(a.z), "r"(a.w), "r"(b0), "r"(b1));
}

// A 16-byte load the compiler keeps in program order with the other volatile asm (so every load is issued
// before the first MMA).
__device__ __forceinline__ uint4 ldg_v(const uint4* p) {
  uint4 v;
  asm volatile("ld.global.nc.v4.u32 {%0,%1,%2,%3}, [%4];\n" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}

template <int KC, int WARPS, int PDLW = 0>
__global__ void __launch_bounds__(WARPS * 32, 1) tcb_kernel(const uint4* __restrict__ w, int n,
                                                         const uint4* __restrict__ xb, int* __restrict__ out) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int tile = blockIdx.x * WARPS + warp;
  if (tile * 16 >= n) return;
  const uint4* wt = w + static_cast<int64_t>(tile) * KC * 2 * 32 + lane;
  uint4 a[KC][2];
#pragma unroll
  for (int c = 0; c < KC; ++c) {
    a[c][0] = ldg_v(wt + (c * 2) * 32);
    a[c][1] = ldg_v(wt + (c * 2 + 1) * 32);
  }
  if (PDLW == 1) asm volatile("griddepcontrol.wait;" ::: "memory");
  if (PDLW == 2) asm volatile("griddepcontrol.launch_dependents;" :::);
  uint4 b[(KC + 1) / 2];
#pragma unroll
  for (int i = 0; i < (KC + 1) / 2; ++i) b[i] = ldg_v(xb + lane * ((KC + 1) / 2) + i);
  // Every load issued before the first MMA (ptxas otherwise sinks them next to their use, one round trip each):
  // a value that depends on all of them, used under a condition that is never true.
  uint32_t h = 0;
#pragma unroll
  for (int c = 0; c < KC; ++c) h ^= a[c][0].x ^ a[c][1].y;
  if (h == 0x9e3779b9u && n < 0) out[0] = static_cast<int>(h);
  int dp[4] = {0, 0, 0, 0}, dn[4] = {0, 0, 0, 0};
#pragma unroll
  for (int c = 0; c < KC; ++c) {
    const uint32_t b0 = c % 2 ? b[c / 2].z : b[c / 2].x, b1 = c % 2 ? b[c / 2].w : b[c / 2].y;
    bmma(dp, a[c][0], b0, b1);
    bmma(dn, a[c][1], b0, b1);
  }
  const int t = lane % 4, g = lane / 4;
  // columns 2t, 2t + 1 = bit planes j; weight 2^j, negative for j = 7.
  const int w0 = (2 * t == 7 ? -1 : 1) << (2 * t), w1 = (2 * t + 1 == 7 ? -(1 << 7) : (1 << (2 * t + 1)));
  int r0 = w0 * (dp[0] - dn[0]) + w1 * (dp[1] - dn[1]);
  int r1 = w0 * (dp[2] - dn[2]) + w1 * (dp[3] - dn[3]);
  r0 += __shfl_xor_sync(0xffffffffu, r0, 1);
  r0 += __shfl_xor_sync(0xffffffffu, r0, 2);
  r1 += __shfl_xor_sync(0xffffffffu, r1, 1);
  r1 += __shfl_xor_sync(0xffffffffu, r1, 2);
  if (t == 0) {
    if (tile * 16 + g < n) out[tile * 16 + g] = r0;
    if (tile * 16 + g + 8 < n) out[tile * 16 + g + 8] = r1;
  }
}

// Persistent grid: block b takes passes [b * P / G, (b + 1) * P / G) of RP = WARPS * 32 / LPR rows each; a lane
// holds all NP = nch / LPR pieces of its row (NP <= PMAX) and the next pass's pieces are loaded before the
// current ones are multiplied.
template <int LPR, int PMAX, int WARPS>
__global__ void __launch_bounds__(WARPS * 32) stream_kernel(const uint4* __restrict__ w, int n, int nch,
                                                            const int8_t* __restrict__ xq, int* __restrict__ out) {
  extern __shared__ uint4 xs[];
  constexpr int RP = WARPS * 32 / LPR;
  const int passes = (n + RP - 1) / RP;
  const int p0 = static_cast<int>(static_cast<int64_t>(blockIdx.x) * passes / gridDim.x);
  const int p1 = static_cast<int>(static_cast<int64_t>(blockIdx.x + 1) * passes / gridDim.x);
  const int slot = threadIdx.x / LPR, sub = threadIdx.x % LPR;
  auto load = [&](int p, uint4 (&v)[PMAX]) {
    const int row = p * RP + slot;
    const uint4* wr = w + static_cast<int64_t>(min(row, n - 1)) * nch;
#pragma unroll
    for (int u = 0; u < PMAX; ++u) v[u] = sub + u * LPR < nch ? __ldg(wr + sub + u * LPR) : make_uint4(0, 0, 0, 0);
  };
  uint4 cur[PMAX], nxt[PMAX];
  if (p0 < p1) load(p0, cur);
  stage_x(xq, nch, xs);
  for (int p = p0; p < p1; ++p) {
    if (p + 1 < p1) load(p + 1, nxt);
    int acc[4] = {0, 0, 0, 0};
#pragma unroll
    for (int u = 0; u < PMAX; ++u) {
      const int c = sub + u * LPR;
      if (c >= nch) break;
      const uint4 xv[4] = {xs[c], xs[nch + c], xs[2 * nch + c], xs[3 * nch + c]};
      piece_dot(cur[u], xv, acc);
    }
    int s = combine(acc);
#pragma unroll
    for (int off = LPR / 2; off > 0; off /= 2) s += __shfl_xor_sync(0xffffffffu, s, off);
    const int row = p * RP + slot;
    if (row < n && sub == 0) out[row] = s;
#pragma unroll
    for (int u = 0; u < PMAX; ++u) cur[u] = nxt[u];
  }
}

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// One block per SM. Block b owns passes [b * P / G, (b + 1) * P / G) of RP = THREADS / 8 rows (rows are
// contiguous in memory, so a pass is one bulk copy); thread 0 requests every pass at entry, pass i completing
// mbarrier i; 8 lanes per row multiply from shared memory.
template <int THREADS, int MAXP>
__global__ void __launch_bounds__(THREADS) tma_kernel(const uint4* __restrict__ w, int n, int nch,
                                                      const int8_t* __restrict__ xq, int* __restrict__ out,
                                                      int compute) {
  extern __shared__ __align__(128) uint4 sm[];
  __shared__ __align__(8) uint64_t bar[MAXP];
  constexpr int RP = THREADS / 8;
  const int passes = (n + RP - 1) / RP;
  const int p0 = static_cast<int>(static_cast<int64_t>(blockIdx.x) * passes / gridDim.x);
  const int p1 = static_cast<int>(static_cast<int64_t>(blockIdx.x + 1) * passes / gridDim.x);
  const int np = p1 - p0;
  uint4* xs = sm;
  uint4* ws = sm + nch * 4;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (threadIdx.x == 0) {
    for (int i = 0; i < np; ++i) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(smem_addr(&bar[i])) : "memory");
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    for (int i = 0; i < np; ++i) {
      const int r0 = (p0 + i) * RP, rows = min(RP, n - r0);
      const uint32_t bytes = static_cast<uint32_t>(rows) * nch * 16;
      asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_addr(&bar[i])),
                   "r"(bytes) : "memory");
      asm volatile(
          "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
              smem_addr(ws + static_cast<int64_t>(i) * RP * nch)),
          "l"(w + static_cast<int64_t>(r0) * nch), "r"(bytes), "r"(smem_addr(&bar[i]))
          : "memory");
    }
  }
#endif
  stage_x(xq, nch, xs);  // its __syncthreads also publishes the barrier initialisation
  const int slot = threadIdx.x / 8, sub = threadIdx.x % 8;
  for (int i = 0; i < np; ++i) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    uint32_t done = 0;
    while (!done) {
      asm volatile(
          "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
          : "=r"(done)
          : "r"(smem_addr(&bar[i])), "r"(0)
          : "memory");
    }
#endif
    const int row = (p0 + i) * RP + slot;
    if (!compute || row >= n) continue;
    const uint4* wr = ws + static_cast<int64_t>(i * RP + slot) * nch;
    int acc[4] = {0, 0, 0, 0};
    for (int c = sub; c < nch; c += 8) {
      const uint4 xv[4] = {xs[c], xs[nch + c], xs[2 * nch + c], xs[3 * nch + c]};
      piece_dot(wr[c], xv, acc);
    }
    int s = combine(acc);
#pragma unroll
    for (int off = 4; off > 0; off /= 2) s += __shfl_xor_sync(0xffffffffu, s, off);
    if (sub == 0) out[row] = s;
  }
}

static double time_graph(cudaStream_t st, int launches, int reps, const std::function<void(int)>& fn) {
  for (int i = 0; i < 3; ++i) fn(i);
  CK(cudaStreamSynchronize(st));
  cudaGraph_t g;
  cudaGraphExec_t ge;
  CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < launches; ++i) fn(i);
  CK(cudaStreamEndCapture(st, &g));
  CK(cudaGraphInstantiate(&ge, g, 0));
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  CK(cudaGraphLaunch(ge, st));
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    cudaEventRecord(a, st);
    CK(cudaGraphLaunch(ge, st));
    cudaEventRecord(b, st);
    CK(cudaEventSynchronize(b));
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    t.push_back(ms * 1000.0 / launches);
  }
  cudaGraphExecDestroy(ge);
  cudaGraphDestroy(g);
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 15;
  const char* filter = argc > 2 ? argv[2] : "";
  const bool once = argc > 3 && std::string(argv[3]) == "once";
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  const int nsm = prop.multiProcessorCount;
  std::printf("GPU: %s, %d SMs, L2 %d MB\n", prop.name, nsm, prop.l2CacheSize >> 20);
  CK(cudaFuncSetAttribute(tma_kernel<256, 16>, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024));
  CK(cudaFuncSetAttribute(tma_kernel<512, 16>, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024));
  CK(cudaFuncSetAttribute(tma_kernel<1024, 16>, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024));
  cudaStream_t st;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  struct Shape { int n, k; };
  const Shape shapes[] = {{13824, 2560}, {2560, 6912}, {3840, 2560}, {2560, 2560}};
  std::mt19937 rng(7);
  std::printf("| shape | variant | us cold | us hot | GB/s cold | check |\n| --- | --- | ---: | ---: | ---: | --- |\n");
  for (const Shape& sh : shapes) {
    const int n = sh.n, nch = sh.k / 64;
    const size_t wbytes = static_cast<size_t>(n) * nch * 16;
    const int copies = static_cast<int>((size_t{512} << 20) / wbytes + 1);
    std::vector<uint32_t> hw(wbytes / 4);
    for (auto& v : hw) {
      uint32_t x = 0;
      for (int f = 0; f < 16; ++f) x |= static_cast<uint32_t>(rng() % 3) << (2 * f);
      v = x;
    }
    std::vector<int8_t> hx(sh.k);
    for (auto& v : hx) v = static_cast<int8_t>(static_cast<int>(rng() % 256) - 128);
    // Reference: word q of chunk c, group g (bits 2g of each byte b) meets x[c * 64 + q * 16 + g * 4 + b].
    std::vector<int> ref(n);
    for (int r = 0; r < n; ++r) {
      long s = 0;
      for (int c = 0; c < nch; ++c)
        for (int q = 0; q < 4; ++q) {
          const uint32_t wd = hw[(static_cast<size_t>(r) * nch + c) * 4 + q];
          for (int g = 0; g < 4; ++g)
            for (int b = 0; b < 4; ++b) s += static_cast<long>((wd >> (8 * b + 2 * g)) & 3) * hx[c * 64 + q * 16 + g * 4 + b];
        }
      ref[r] = static_cast<int>(s);
    }
    uint4* dw;
    int8_t* dx;
    int* dout;
    CK(cudaMalloc(&dw, wbytes * copies));
    CK(cudaMalloc(&dx, sh.k));
    CK(cudaMalloc(&dout, n * sizeof(int)));
    for (int c = 0; c < copies; ++c)
      CK(cudaMemcpy(reinterpret_cast<char*>(dw) + wbytes * c, hw.data(), wbytes, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dx, hx.data(), sh.k, cudaMemcpyHostToDevice));
    auto wc = [&](int i, bool cold) { return reinterpret_cast<const uint4*>(reinterpret_cast<char*>(dw) + wbytes * (cold ? i % copies : 0)); };
    auto report = [&](const char* name, const std::function<void(const uint4*)>& run, bool check) {
      if (!std::string(name).empty() && std::string(name).find(filter) == std::string::npos) return;
      if (once) {
        run(dw);
        CK(cudaStreamSynchronize(st));
        return;
      }
      const char* ok = "-";
      if (check) {
        CK(cudaMemset(dout, 0, n * sizeof(int)));
        run(dw);
        CK(cudaStreamSynchronize(st));
        CK(cudaGetLastError());
        std::vector<int> got(n);
        CK(cudaMemcpy(got.data(), dout, n * sizeof(int), cudaMemcpyDeviceToHost));
        ok = got == ref ? "exact" : "MISMATCH";
      }
      const double cold = time_graph(st, 100, reps, [&](int i) { run(wc(i, true)); });
      const double hot = time_graph(st, 100, reps, [&](int i) { run(wc(i, false)); });
      std::printf("| %dx%d | %s | %.2f | %.2f | %.0f | %s |\n", n, sh.k, name, cold, hot, wbytes / (cold * 1e-6) / 1e9, ok);
      std::fflush(stdout);
    };
    const int xsm = nch * 64;
    // empty and read with the base grid of 8 lanes per row (16 rows per block).
    report("empty kernel, base grid", [&](const uint4*) { empty_kernel<<<n / 16, 128, 0, st>>>(dout); }, false);
    report("read only, base grid (8 lanes, all pieces in flight)",
           [&](const uint4* w) { read_kernel<8, 8, 4><<<n / 16, 128, 0, st>>>(w, n, nch, dout); }, false);
    report("read only, 32 lanes, 256-thread blocks",
           [&](const uint4* w) { read_kernel<32, 4, 8><<<(n + 7) / 8, 256, 0, st>>>(w, n, nch, dout); }, false);
    report("base: 8 lanes, U 4, 128 threads",
           [&](const uint4* w) { var_kernel<8, 4, 4, 0><<<n / 16, 128, xsm, st>>>(w, n, nch, dx, dout); }, true);
    report("base: 32 lanes, U 4, 256 threads",
           [&](const uint4* w) { var_kernel<32, 4, 8, 0><<<(n + 7) / 8, 256, xsm, st>>>(w, n, nch, dx, dout); }, true);
    // tcb: the same ternary weights (w = code - 1) as bit planes; its sums are sum w x = ref - sum x.
    {
      const int kc = (sh.k + 255) / 256, tiles = (n + 15) / 16;
      std::vector<uint32_t> tw(static_cast<size_t>(tiles) * kc * 2 * 32 * 4, 0u);
      auto code = [&](int r, int k) -> int {
        if (r >= n || k >= sh.k) return 1;  // w = 0
        const int c = k / 64, q = (k % 64) / 16, g = (k % 16) / 4, b = k % 4;
        return (hw[(static_cast<size_t>(r) * nch + c) * 4 + q] >> (8 * b + 2 * g)) & 3;
      };
      for (int tl = 0; tl < tiles; ++tl)
        for (int c = 0; c < kc; ++c)
          for (int pl = 0; pl < 2; ++pl)
            for (int ln = 0; ln < 32; ++ln) {
              const int g = ln / 4, t = ln % 4;
              for (int reg = 0; reg < 4; ++reg) {
                const int row = tl * 16 + g + (reg & 1) * 8, k0 = c * 256 + (reg >> 1) * 128 + 32 * t;
                uint32_t v = 0;
                for (int i = 0; i < 32; ++i) {
                  const int wv = code(row, k0 + i) - 1;
                  if ((pl == 0 && wv == 1) || (pl == 1 && wv == -1)) v |= 1u << i;
                }
                tw[((((static_cast<size_t>(tl) * kc + c) * 2 + pl) * 32 + ln) * 4) + reg] = v;
              }
            }
      const int kc2 = (kc + 1) / 2;
      std::vector<uint32_t> xb(static_cast<size_t>(32) * kc2 * 4, 0u), xbp(static_cast<size_t>(64) * kc, 0u);
      for (int ln = 0; ln < 32; ++ln)
        for (int c = 0; c < kc; ++c)
          for (int h = 0; h < 2; ++h) {
            const int j = ln / 4, t = ln % 4, k0 = c * 256 + h * 128 + 32 * t;
            uint32_t v = 0;
            for (int i = 0; i < 32; ++i) {
              const int k = k0 + i;
              const uint8_t xv = k < sh.k ? static_cast<uint8_t>(hx[k]) : 0;
              if ((xv >> j) & 1) v |= 1u << i;
            }
            xb[static_cast<size_t>(ln) * kc2 * 4 + c * 2 + h] = v;
            xbp[(static_cast<size_t>(c) * 32 + ln) * 2 + h] = v;  // the product's order [chunk][lane][h]
          }
      long sx = 0;
      for (int k = 0; k < sh.k; ++k) sx += hx[k];
      std::vector<int> tref(n), negc((n + 15) / 16 * 16, 0);
      for (int r = 0; r < n; ++r) tref[r] = ref[r] - static_cast<int>(sx);
      for (int r = 0; r < n; ++r)
        for (int k = 0; k < sh.k; ++k) negc[r] += code(r, k) == 0;
      int* dneg;
      CK(cudaMalloc(&dneg, negc.size() * 4));
      CK(cudaMemcpy(dneg, negc.data(), negc.size() * 4, cudaMemcpyHostToDevice));
      const size_t tbytes = tw.size() * 4;
      const int tcopies = static_cast<int>((size_t{512} << 20) / tbytes + 1);
      uint4 *dtw, *dxb;
      CK(cudaMalloc(&dtw, tbytes * tcopies));
      CK(cudaMalloc(&dxb, xb.size() * 4));
      for (int c = 0; c < tcopies; ++c)
        CK(cudaMemcpy(reinterpret_cast<char*>(dtw) + tbytes * c, tw.data(), tbytes, cudaMemcpyHostToDevice));
      CK(cudaMemcpy(dxb, xb.data(), xb.size() * 4, cudaMemcpyHostToDevice));
      uint32_t* dxbp;
      CK(cudaMalloc(&dxbp, xbp.size() * 4));
      CK(cudaMemcpy(dxbp, xbp.data(), xbp.size() * 4, cudaMemcpyHostToDevice));
      auto trun = [&](const char* name, const std::function<void(const uint4*)>& run) {
        if (std::string(name).find(filter) == std::string::npos) return;
        if (once) { run(dtw); CK(cudaStreamSynchronize(st)); return; }
        CK(cudaMemset(dout, 0, n * sizeof(int)));
        run(dtw);
        CK(cudaStreamSynchronize(st));
        CK(cudaGetLastError());
        std::vector<int> got(n);
        CK(cudaMemcpy(got.data(), dout, n * sizeof(int), cudaMemcpyDeviceToHost));
        const char* ok = got == tref ? "exact" : "MISMATCH";
        auto at = [&](int i, bool cold) { return reinterpret_cast<const uint4*>(reinterpret_cast<char*>(dtw) + tbytes * (cold ? i % tcopies : 0)); };
        const double cold = time_graph(st, 100, reps, [&](int i) { run(at(i, true)); });
        const double hot = time_graph(st, 100, reps, [&](int i) { run(at(i, false)); });
        std::printf("| %dx%d | %s | %.2f | %.2f | %.0f | %s |\n", n, sh.k, name, cold, hot, tbytes / (cold * 1e-6) / 1e9, ok);
        std::fflush(stdout);
      };
      auto tcb = [&](auto kern, int warps) {
        return [=, &dout, &dxb, &st](const uint4* w) { kern<<<(tiles + warps - 1) / warps, warps * 32, 0, st>>>(w, n, dxb, dout); };
      };
      for (int ks : {1, 2, 3, 4}) {
        char name[64];
        std::snprintf(name, sizeof name, "product tcb_matmul, ksplit %d", ks);
        trun(name, [=, &dout, &st](const uint4* w) {
          tritium::cuda::tcb_matmul_i32(reinterpret_cast<const uint32_t*>(w), dneg, n, kc * 256, dxbp, 1, dout, st,
                                        ks);
        });
      }
      if (kc == 10) {
        trun("tcb bit planes b1 MMA, 1 warp/block", tcb(tcb_kernel<10, 1>, 1));
        trun("tcb bit planes b1 MMA, 2 warps/block", tcb(tcb_kernel<10, 2>, 2));
        trun("tcb bit planes b1 MMA, 2 warps/block + griddepcontrol.wait after weight loads", tcb(tcb_kernel<10, 2, 1>, 2));
        trun("tcb bit planes b1 MMA, 2 warps/block + launch_dependents after weight loads", tcb(tcb_kernel<10, 2, 2>, 2));
        trun("tcb bit planes b1 MMA, 4 warps/block", tcb(tcb_kernel<10, 4>, 4));
      } else if (kc == 27) {
        trun("tcb bit planes b1 MMA, 1 warp/block", tcb(tcb_kernel<27, 1>, 1));
        trun("tcb bit planes b1 MMA, 2 warps/block", tcb(tcb_kernel<27, 2>, 2));
        trun("tcb bit planes b1 MMA, 4 warps/block", tcb(tcb_kernel<27, 4>, 4));
      }
      CK(cudaFree(dtw));
      CK(cudaFree(dxb));
      CK(cudaFree(dneg));
      CK(cudaFree(dxbp));
    }
    auto v8 = [&](const char* name, auto kern) {
      report(name, [&](const uint4* w) { kern<<<n / 16, 128, xsm, st>>>(w, n, nch, dx, dout); }, true);
    };
    auto v32 = [&](const char* name, auto kern) {
      report(name, [&](const uint4* w) { kern<<<(n + 7) / 8, 256, xsm, st>>>(w, n, nch, dx, dout); }, true);
    };
    v8("var 8 lanes U 8: x staged after weights", var_kernel<8, 8, 4, 0>);
    v8("var 8 lanes U 4: x staging loads first", var_kernel<8, 4, 4, 1>);
    v8("var 8 lanes U 8: x staging loads first", var_kernel<8, 8, 4, 1>);
    v8("var 8 lanes U 4: x from L1, no staging", var_kernel<8, 4, 4, 2>);
    v8("var 8 lanes U 8: x from L1, no staging", var_kernel<8, 8, 4, 2>);
    report("var 16 lanes U 8: x staging loads first", [&](const uint4* w) { var_kernel<16, 8, 4, 1><<<n / 8, 128, xsm, st>>>(w, n, nch, dx, dout); }, true);
    report("var 8 lanes U 8, 64 threads: x staging loads first", [&](const uint4* w) { var_kernel<8, 8, 2, 1><<<n / 8, 64, xsm, st>>>(w, n, nch, dx, dout); }, true);
    report("var 8 lanes U 8, 256 threads: x staging loads first", [&](const uint4* w) { var_kernel<8, 8, 8, 1><<<n / 32, 256, xsm, st>>>(w, n, nch, dx, dout); }, true);
    v32("var 32 lanes U 4: x staging loads first", var_kernel<32, 4, 8, 1>);
    v32("var 32 lanes U 4: x from L1, no staging", var_kernel<32, 4, 8, 2>);
    CK(cudaFree(dw));
    CK(cudaFree(dx));
    CK(cudaFree(dout));
  }
  return 0;
}
