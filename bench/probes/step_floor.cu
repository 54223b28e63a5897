// Step-floor probe (issue #4, session 5; bench/CUDA_NOTES.md version 12): how fast can a batch-1 decode step of
// the 2B4T shape (30 layers, hidden 2560, inter 6912, 20 x 128 query heads, 5 KV heads) be on this GPU when the
// arithmetic is free? It keeps every global dependency of the real step (RMSNorm -> qkv -> attention -> sub-norm ->
// o + residual -> norm -> gate_up -> GLU + sub-norm -> down + residual) and the real weight bytes (tc2, 2 bits per
// weight, 17.4 MB per layer, cold: 30 distinct layers, 521 MB) but replaces every GEMV, the attention and the
// quantization by the loads they need plus one XOR/sum per value. Two designs:
//   persistent - one cooperative kernel, one block per SM, five phases per layer separated by grid barriers (the
//                design of src/kernels/cuda/decode_persistent.cu): barrier, every block reads the phase's input row
//                from L2 and reduces it (1 or 3 block reductions), waits for its weight slice (TMA bulk copy into
//                shared memory, requested at the phase's start or one phase ahead), writes its output rows.
//   layered    - nine kernels per layer in a CUDA graph with programmatic dependent launch (the design of the
//                shipped decode path): the weight rows are loaded before griddepcontrol.wait, the input after it.
// The lm_head (657 MB of bf16 at the copy bandwidth) is not included: add it to the per-step time.
// Standalone, not part of the build: nvcc -O3 -arch=sm_90a -std=c++20 -o step_floor bench/probes/step_floor.cu
// Usage: step_floor [reps]
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <type_traits>
#include <vector>

#include "probe_check.cuh"

constexpr int kLayers = 30, kHidden = 2560, kInter = 6912, kHeads = 20, kKvHeads = 5, kHeadDim = 128;
constexpr int kQkv = kHidden + 2 * kKvHeads * kHeadDim;  // 3840
constexpr int kCtx = 64;                                 // context positions read by each attention item
// The four projections: rows, k. Weight bytes = rows * k / 4 (tc2).
__host__ __device__ constexpr int proj_n(int p) { return p == 0 ? kQkv : (p == 2 ? 2 * kInter : kHidden); }
__host__ __device__ constexpr int proj_k(int p) { return p == 3 ? kInter : kHidden; }
__host__ __device__ constexpr int64_t proj_bytes(int p) { return int64_t(proj_n(p)) * proj_k(p) / 4; }
__host__ __device__ constexpr int64_t layer_bytes() { return proj_bytes(0) + proj_bytes(1) + proj_bytes(2) + proj_bytes(3); }

// ------------------------------------------------------------------------------------------------------------
// Shared helpers
__device__ __forceinline__ unsigned smem_addr(const void* p) { return static_cast<unsigned>(__cvta_generic_to_shared(p)); }

template <int NT>
__device__ __forceinline__ float block_sum(float v, float* sm) {
#pragma unroll
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  __syncthreads();  // sm reused by the previous reduction
  if (threadIdx.x % 32 == 0) sm[threadIdx.x / 32] = v;
  __syncthreads();
  float r = 0.f;
#pragma unroll
  for (int i = 0; i < NT / 32; ++i) r += sm[i];
  return r;
}

/// Reads n floats of src through L2 (data written by other blocks) and reduces them nred times (each reduction
/// depends on the previous one, as RMSNorm -> absmax -> sum of codes do).
template <int NT>
__device__ __forceinline__ float row_reduce(const float* src, int n, int nred, float* sm) {
  const float4* s4 = reinterpret_cast<const float4*>(src);
  constexpr int V = 14 * 256 / NT;  // up to 14336 floats
  float4 v[V];
#pragma unroll
  for (int j = 0; j < V; ++j) {
    const int i = threadIdx.x + j * NT;
    v[j] = i < n / 4 ? __ldcg(s4 + i) : make_float4(0.f, 0.f, 0.f, 0.f);
  }
  float acc = 0.f;
#pragma unroll
  for (int j = 0; j < V; ++j) acc += v[j].x * v[j].x + v[j].y * v[j].y + v[j].z * v[j].z + v[j].w * v[j].w;
  float r = block_sum<NT>(acc, sm);
  for (int t = 1; t < nred; ++t) {
    float a2 = 0.f;
#pragma unroll
    for (int j = 0; j < V; ++j) a2 = fmaxf(a2, fabsf(v[j].x * r) + fabsf(v[j].w * r));
    r = block_sum<NT>(a2, sm) + r;
  }
  return r;
}

// ------------------------------------------------------------------------------------------------------------
// Persistent design
struct PArgs {
  const uint8_t* w;    // kLayers * layer_bytes()
  float* x;            // [kHidden] residual
  float* qkv;          // [kQkv]
  float* attn;         // [kHidden]
  float* gu;           // [2 * kInter]
  const float* kv;     // [kKvHeads][2][kCtx][kHeadDim] context
  uint32_t* counter;   // grid barrier
  uint32_t epoch0;     // barriers passed by earlier launches
  int nred;            // block reductions per row prologue (1 or 3)
  int wmode;           // 0 no weights, 1 slice requested at its phase, 2 one weighted phase ahead,
                       // 3 as 1 plus an L2 prefetch of the block's slices pf layers ahead at each layer's start,
                       // 4 as 1 plus an L2 prefetch of the next weighted phase's slice at each phase's start,
                       // 5 the slice loaded into registers by every thread at its phase's start (GEMV style)
  int pf;              // wmode 3: layers ahead
  int attn_kv;         // attention items read the context (kCtx positions) or only q
  int slot_off[4];     // uint4 offsets of the four weight slots in dynamic shared memory
};

__device__ __forceinline__ void grid_sync(uint32_t* counter, uint32_t epoch) {
  __syncthreads();
  if (threadIdx.x == 0) {
    asm volatile("red.release.gpu.global.add.u32 [%0], 1;\n" ::"l"(counter) : "memory");
    const uint32_t target = epoch * gridDim.x;
    uint32_t v = 0;
    do {
      asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(v) : "l"(counter) : "memory");
    } while (v < target);
  }
  __syncthreads();
}

__device__ __forceinline__ void bulk(void* dst, const void* src, uint32_t bytes, uint64_t* bar) {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
  if (bytes == 0) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_addr(bar)) : "memory");
    return;
  }
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(bytes) : "memory");
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
                   smem_addr(dst)), "l"(src), "r"(bytes), "r"(smem_addr(bar))
               : "memory");
}
__device__ __forceinline__ void prefetch_l2(const void* src, uint32_t bytes) {
  if (bytes) asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(src), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
  uint32_t done = 0;
  do {
    asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done) : "r"(smem_addr(bar)), "r"(parity) : "memory");
  } while (!done);
}

template <int NT>
__global__ void __launch_bounds__(NT, 1) persistent_kernel(PArgs a) {
  constexpr int kRegW = (67 * 1024 / 16 + NT - 1) / NT + 1;  // uint4 per thread: the largest slice (gate_up)
  extern __shared__ uint4 smem[];
  __shared__ float red[NT / 32];
  __shared__ uint64_t bar[4];
  const int G = gridDim.x, b = blockIdx.x;
  if (threadIdx.x == 0)
    for (int k = 0; k < 4; ++k) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(smem_addr(&bar[k])) : "memory");
      asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
  __syncthreads();
  auto rows_of = [&](int p, int& r0, int& r1) {
    const int rpb = (proj_n(p) + G - 1) / G;
    r0 = min(proj_n(p), b * rpb);
    r1 = min(proj_n(p), r0 + rpb);
  };
  // This block's rows of projection p of layer l: source address and bytes.
  auto slice = [&](int l, int p, uint32_t& bytes) {
    int r0, r1;
    rows_of(p, r0, r1);
    int64_t off = int64_t(l) * layer_bytes();
    for (int q = 0; q < p; ++q) off += proj_bytes(q);
    const int rb = proj_k(p) / 4;
    bytes = uint32_t((r1 - r0) * rb);
    return a.w + off + int64_t(r0) * rb;
  };
  auto request = [&](int l, int p) {  // thread 0: the slice -> slot p
    if (threadIdx.x != 0 || a.wmode == 0 || l >= kLayers) return;
    uint32_t bytes;
    const uint8_t* src = slice(l, p, bytes);
    bulk(smem + a.slot_off[p], src, bytes, &bar[p]);
  };
  auto prefetch = [&](int l, int p) {  // thread 0: the slice -> L2
    if (threadIdx.x != 0 || l >= kLayers) return;
    uint32_t bytes;
    const uint8_t* src = slice(l, p, bytes);
    prefetch_l2(src, bytes);
  };
  uint4 rw[kRegW];  // wmode 5: this thread's part of the phase's slice
  auto phase_start = [&](int l, int p) {  // wmode 1, 3, 4: request slice p now; 4: prefetch the next one to L2
    if (a.wmode == 1 || a.wmode == 3 || a.wmode == 4) request(l, p);
    if (a.wmode == 5) {
      uint32_t bytes;
      const uint4* src = reinterpret_cast<const uint4*>(slice(l, p, bytes));
      const int n16 = int(bytes / 16);
#pragma unroll
      for (int j = 0; j < kRegW; ++j) {
        const int i = threadIdx.x + j * NT;
        rw[j] = i < n16 ? __ldcs(src + i) : make_uint4(0, 0, 0, 0);
      }
    }
    if (a.wmode == 4) {
      if (p < 3) prefetch(l, p + 1);
      else prefetch(l + 1, 0);
    }
  };
  uint32_t epoch = a.epoch0;
  // The output rows of a projection phase: value = reduction + a word of the weight slice (so they wait for it).
  auto project = [&](int l, int p, float r, float* y, bool add) {
    uint32_t wv = 0;
    if (a.wmode == 5) {
#pragma unroll
      for (int j = 0; j < kRegW; ++j) wv ^= rw[j].x ^ rw[j].y ^ rw[j].z ^ rw[j].w;
    } else if (a.wmode) {
      mbar_wait(&bar[p], uint32_t(l & 1));
      wv = reinterpret_cast<const uint32_t*>(smem + a.slot_off[p])[threadIdx.x % 64];
    }
    int r0, r1;
    rows_of(p, r0, r1);
    for (int row = r0 + threadIdx.x; row < r1; row += NT) {
      const float val = r * 1e-3f + float(wv & 7u) * 1e-6f;
      y[row] = add ? __ldcg(y + row) * 0.5f + val : val;
    }
    __syncthreads();  // the slot is free again
  };
  auto ahead = [&](int l, int p) {  // wmode 2: the next weighted phase's slice
    if (a.wmode == 2) {
      if (p < 3) request(l, p + 1);
      else request(l + 1, 0);
    }
  };
  if (a.wmode == 2) request(0, 0);
  if (a.wmode == 3)
    for (int l = 0; l < a.pf; ++l)
      for (int p = 0; p < 4; ++p) prefetch(l, p);
  for (int l = 0; l < kLayers; ++l) {
    // Q
    if (a.wmode == 3)
      for (int p = 0; p < 4; ++p) prefetch(l + a.pf, p);
    phase_start(l, 0);
    float r = row_reduce<NT>(a.x, kHidden, a.nred, red);
    project(l, 0, r, a.qkv, false);
    grid_sync(a.counter, ++epoch);
    // A: 20 items (one per query head) on blocks 0..19
    if (a.wmode == 2) request(l, 1);
    for (int h = b; h < kHeads; h += G) {
      const int kvh = h / (kHeads / kKvHeads);
      float s = threadIdx.x < kHeadDim ? __ldcg(a.qkv + h * kHeadDim + threadIdx.x) : 0.f;
      if (threadIdx.x < kHeadDim) s += __ldcg(a.qkv + kHidden + kvh * kHeadDim + threadIdx.x);
      if (a.attn_kv) {
        const float4* kv4 = reinterpret_cast<const float4*>(a.kv + int64_t(kvh) * 2 * kCtx * kHeadDim);
        for (int i = threadIdx.x; i < 2 * kCtx * kHeadDim / 4; i += NT) {
          const float4 t = __ldcg(kv4 + i);
          s += t.x + t.y + t.z + t.w;
        }
      }
      const float tot = block_sum<NT>(s, red);
      if (threadIdx.x < kHeadDim) a.attn[h * kHeadDim + threadIdx.x] = tot * 1e-3f + float(threadIdx.x);
    }
    grid_sync(a.counter, ++epoch);
    // O
    phase_start(l, 1);
    r = row_reduce<NT>(a.attn, kHidden, a.nred, red);
    project(l, 1, r, a.x, true);
    ahead(l, 1);
    grid_sync(a.counter, ++epoch);
    // G
    phase_start(l, 2);
    r = row_reduce<NT>(a.x, kHidden, a.nred, red);
    project(l, 2, r, a.gu, false);
    ahead(l, 2);
    grid_sync(a.counter, ++epoch);
    // D (the GLU reads gate and up: 13824 floats)
    phase_start(l, 3);
    r = row_reduce<NT>(a.gu, 2 * kInter, a.nred, red);
    project(l, 3, r, a.x, true);
    ahead(l, 3);
    grid_sync(a.counter, ++epoch);
  }
}

// ------------------------------------------------------------------------------------------------------------
// Layered design: one generic kernel per step. Blocks [0, grid): each loads wbytes_per_block of weights (uint4
// per thread, before the dependent-launch wait), then reads n_in floats of in (all of it: norm rows; or
// act_bytes of quantized activations: GEMV blocks) and writes its out_per_block outputs.
struct LArgs {
  const uint4* w;
  int64_t wbytes_per_block;
  const float* in;
  int n_in;     // floats read by every block after the wait
  float* out;
  int out_per_block;
  int n_out;
};

__device__ __forceinline__ void pdl_trigger() { asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory"); }
__device__ __forceinline__ void pdl_wait() { asm volatile("griddepcontrol.wait;\n" ::: "memory"); }

template <int NT>
__global__ void __launch_bounds__(NT) layered_kernel(LArgs a) {
  __shared__ float red[NT / 32];
  pdl_trigger();
  uint32_t wx = 0;
  if (a.w) {
    const uint4* wb = a.w + blockIdx.x * (a.wbytes_per_block / 16);
    const int n16 = int(a.wbytes_per_block / 16);
    uint4 t[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int i = threadIdx.x + j * NT;
      t[j] = i < n16 ? __ldg(wb + i) : make_uint4(0, 0, 0, 0);
    }
    for (int i = threadIdx.x + 8 * NT; i < n16; i += NT) wx ^= __ldg(wb + i).x;
#pragma unroll
    for (int j = 0; j < 8; ++j) wx ^= t[j].x ^ t[j].y ^ t[j].z ^ t[j].w;
  }
  pdl_wait();
  float s = 0.f;
  for (int i = threadIdx.x; i < a.n_in; i += NT) s += __ldcg(a.in + i);
  s = block_sum<NT>(s, red);
  for (int i = threadIdx.x; i < a.out_per_block; i += NT) {
    const int o = blockIdx.x * a.out_per_block + i;
    if (o < a.n_out) a.out[o] = s * 1e-3f + float(wx & 7u);
  }
}

// Bandwidth kernels: a copy (the product's roofline convention: read + write bytes over time) and a read-only
// stream (the floor of the bf16 lm_head GEMV).
__global__ void copy_kernel(const uint4* __restrict__ src, uint4* __restrict__ dst, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    dst[i] = src[i];
}
__global__ void read_kernel(const uint4* __restrict__ src, int64_t n, uint32_t* out) {
  uint32_t x = 0;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const uint4 v = __ldcs(src + i);
    x ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (x == 0x12345678u) out[0] = x;
}

// ------------------------------------------------------------------------------------------------------------
template <class F>
double median_us(cudaStream_t st, int reps, F launch) {
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  launch();  // warm-up
  CK(cudaStreamSynchronize(st));
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    CK(cudaEventRecord(e0, st));
    launch();
    CK(cudaEventRecord(e1, st));
    CK(cudaEventSynchronize(e1));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    t.push_back(ms * 1e3);
  }
  std::sort(t.begin(), t.end());
  CK(cudaEventDestroy(e0));
  CK(cudaEventDestroy(e1));
  return t[t.size() / 2];
}

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 21;
  int dev = 0, sms = 0;
  CK(cudaGetDevice(&dev));
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, dev));
  std::printf("device: %s, %d SMs\n", prop.name, sms);
  const int64_t wtotal = kLayers * layer_bytes();
  uint8_t* w;
  float *x, *qkv, *attn, *gu, *kv, *act, *lin, *lout;
  uint32_t* counter;
  CK(cudaMalloc(&w, wtotal));
  CK(cudaMemset(w, 0x5a, wtotal));
  CK(cudaMalloc(&x, kHidden * 4));
  CK(cudaMalloc(&qkv, kQkv * 4));
  CK(cudaMalloc(&attn, kHidden * 4));
  CK(cudaMalloc(&gu, 2 * kInter * 4));
  CK(cudaMalloc(&act, 2 * kInter * 4));
  CK(cudaMalloc(&lin, 32768 * 4));
  CK(cudaMalloc(&lout, 32768 * 4));
  CK(cudaMemset(lin, 0, 32768 * 4));
  CK(cudaMemset(lout, 0, 32768 * 4));
  CK(cudaMalloc(&kv, int64_t(kKvHeads) * 2 * kCtx * kHeadDim * 4));
  CK(cudaMemset(x, 0, kHidden * 4));
  CK(cudaMemset(qkv, 0, kQkv * 4));
  CK(cudaMemset(attn, 0, kHidden * 4));
  CK(cudaMemset(gu, 0, 2 * kInter * 4));
  CK(cudaMemset(act, 0, 2 * kInter * 4));
  CK(cudaMemset(kv, 0, int64_t(kKvHeads) * 2 * kCtx * kHeadDim * 4));
  CK(cudaMalloc(&counter, 4));
  CK(cudaMemset(counter, 0, 4));
  cudaStream_t st;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  // Copy bandwidth (read + write, the product's roofline convention) and the lm_head read floor, in this run.
  double copy_bw = 0, lm_us = 0;
  const int64_t lm_bytes = int64_t(128256) * kHidden * 2;
  {
    uint4 *src, *dst;
    const int64_t bytes = int64_t(1) << 30;
    CK(cudaMalloc(&src, bytes));
    CK(cudaMalloc(&dst, bytes));
    CK(cudaMemset(src, 1, bytes));
    const double us = median_us(st, 7, [&] { copy_kernel<<<sms * 8, 256, 0, st>>>(src, dst, bytes / 16); });
    copy_bw = 2.0 * bytes / (us * 1e-6);
    lm_us = median_us(st, 7, [&] { read_kernel<<<sms * 8, 256, 0, st>>>(src, lm_bytes / 16, reinterpret_cast<uint32_t*>(dst)); });
    std::printf("copy kernel 1 GiB: %.1f us = %.2f TB/s (read + write); read of the lm_head's %.1f MB: %.1f us = %.2f TB/s\n",
                us, copy_bw / 1e12, lm_bytes / 1e6, lm_us, lm_bytes / (lm_us * 1e-6) / 1e12);
    CK(cudaFree(src));
    CK(cudaFree(dst));
  }
  const double roofline_us = (kLayers * layer_bytes() + lm_bytes) / copy_bw * 1e6;
  std::printf("roofline (weight bytes %.1f MB / copy bandwidth): %.1f us per step; 60%% of it: %.1f us per step\n",
              (kLayers * layer_bytes() + lm_bytes) / 1e6, roofline_us, roofline_us / 0.6);
  std::printf("so 60%% needs the 30 layers in %.1f us - %.1f us (lm_head read) = %.2f us per layer\n", roofline_us / 0.6,
              lm_us, (roofline_us / 0.6 - lm_us) / kLayers);
  std::printf("weights per layer %.2f MB (tc2), 30 layers %.1f MB\n\n", layer_bytes() / 1e6, wtotal / 1e6);

  // ---- persistent
  std::printf("| design | variant | us per step (30 layers) | us per layer | weights GB/s | %% of roofline with the lm_head read |\n| --- | --- | ---: | ---: | ---: | ---: |\n");
  auto pct = [&](double us) { return 100.0 * roofline_us / (us + lm_us); };
  uint32_t epochs = 0;  // barriers passed over all launches (the counter is never reset)
  auto run_persistent = [&](auto nt, bool all) {
    constexpr int NT = decltype(nt)::value;
    int off = 0, so[4];
    for (int p = 0; p < 4; ++p) {
      so[p] = off;
      const int rpb = (proj_n(p) + sms - 1) / sms;
      off += (rpb * proj_k(p) / 4 + 15) / 16;
    }
    const size_t smem = size_t(off) * 16;
    CK(cudaFuncSetAttribute(persistent_kernel<NT>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    struct V { const char* name; int nred, wmode, attn, pf; };
    const V vs[] = {{"barriers + rows, 1 reduction, no weights, no KV", 1, 0, 0, 0},
                    {"barriers + rows, 3 reductions, no weights, no KV", 3, 0, 0, 0},
                    {"1 reduction, KV reads, no weights", 1, 0, 1, 0},
                    {"1 reduction, KV, weights at their phase", 1, 1, 1, 0},
                    {"1 reduction, KV, weights one phase ahead", 1, 2, 1, 0},
                    {"1 reduction, KV, weights at their phase + L2 prefetch 1 layer ahead", 1, 3, 1, 1},
                    {"1 reduction, KV, weights at their phase + L2 prefetch 2 layers ahead", 1, 3, 1, 2},
                    {"1 reduction, KV, weights at their phase + L2 prefetch 1 phase ahead", 1, 4, 1, 0},
                    {"3 reductions, KV, weights at their phase", 3, 1, 1, 0},
                    {"3 reductions, KV, weights at their phase + L2 prefetch 1 layer ahead", 3, 3, 1, 1},
                    {"1 reduction, KV, weights into registers at their phase", 1, 5, 1, 0}};
    for (const V& v : vs) {
      if (!all && v.wmode != 0 && v.wmode != 1 && v.wmode != 5) continue;
      PArgs a{};
      a.w = w, a.x = x, a.qkv = qkv, a.attn = attn, a.gu = gu, a.kv = kv, a.counter = counter;
      a.nred = v.nred, a.wmode = v.wmode, a.attn_kv = v.attn, a.pf = v.pf;
      for (int p = 0; p < 4; ++p) a.slot_off[p] = so[p];
      const double us = median_us(st, reps, [&] {
        a.epoch0 = epochs;
        void* args[] = {&a};
        CK(cudaLaunchCooperativeKernel(reinterpret_cast<void*>(persistent_kernel<NT>), dim3(sms), dim3(NT), args, smem, st));
        epochs += 5 * kLayers;
      });
      std::printf("| persistent %d x %d | %s | %.1f | %.2f | %.0f | %.1f%% |\n", sms, NT, v.name, us, us / kLayers,
                  v.wmode ? wtotal / (us * 1e-6) / 1e9 : 0.0, pct(us));
    }
  };
  run_persistent(std::integral_constant<int, 256>{}, true);
  run_persistent(std::integral_constant<int, 512>{}, false);
  // ---- layered: nine kernels per layer, PDL, one graph
  {
    constexpr int NT = 128;
    struct K { int grid, n_in, out_per_block, n_out; int64_t wpb; int proj; };
    // GEMV grids as the shipped kernels (8 rows per 128-thread block; 16 rows x 32 lanes-per-row for down)
    auto gemv = [](int p) {
      const int rpb = proj_k(p) > 4096 ? 4 : 8;
      return K{(proj_n(p) + rpb - 1) / rpb, proj_k(p) / 4 /* int8 activations as floats' bytes */, rpb, proj_n(p),
               int64_t(rpb) * proj_k(p) / 4, p};
    };
    const K chain[9] = {{1, kHidden, kHidden, kHidden, 0, -1},          // input RMSNorm + quantization
                        gemv(0),                                       // qkv
                        {kHeads, kHeadDim * 3 + 2 * kCtx * kHeadDim, kHeadDim, kHidden, 0, -1},  // attention: q, k, v + context
                        {1, kHidden, kHidden, kHidden, 0, -1},         // attn_sub_norm + quantization
                        gemv(1),                                       // o + residual
                        {1, kHidden, kHidden, kHidden, 0, -1},         // post norm + quantization
                        gemv(2),                                       // gate_up
                        {1, 2 * kInter, kInter, kInter, 0, -1},        // GLU + ffn_sub_norm + quantization
                        gemv(3)};                                      // down + residual
    for (int with_w = 0; with_w < 2; ++with_w)
      for (int pdl = 0; pdl < 2; ++pdl) {
        cudaGraph_t g;
        CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
        for (int l = 0; l < kLayers; ++l) {
          int64_t off = int64_t(l) * layer_bytes();
          for (int i = 0; i < 9; ++i) {
            const K& k = chain[i];
            LArgs la{};
            if (with_w && k.proj >= 0) {
              int64_t o = off;
              for (int q = 0; q < k.proj; ++q) o += proj_bytes(q);
              la.w = reinterpret_cast<const uint4*>(w + o);
              la.wbytes_per_block = k.wpb;
            }
            la.in = (i % 2 == 0) ? lin : lout;
            la.n_in = k.n_in;
            la.out = (i % 2 == 0) ? lout : lin;
            la.out_per_block = k.out_per_block;
            la.n_out = k.n_out;
            cudaLaunchConfig_t cfg{};
            cfg.gridDim = dim3(k.grid);
            cfg.blockDim = dim3(k.grid == 1 ? 256 : NT);
            cfg.stream = st;
            cudaLaunchAttribute at[1];
            at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
            at[0].val.programmaticStreamSerializationAllowed = 1;
            cfg.attrs = at;
            cfg.numAttrs = pdl ? 1 : 0;
            if (k.grid == 1) CK(cudaLaunchKernelEx(&cfg, layered_kernel<256>, la));
            else CK(cudaLaunchKernelEx(&cfg, layered_kernel<NT>, la));
          }
        }
        CK(cudaStreamEndCapture(st, &g));
        cudaGraphExec_t ge;
        CK(cudaGraphInstantiate(&ge, g, 0));
        const double us = median_us(st, reps, [&] { CK(cudaGraphLaunch(ge, st)); });
        std::printf("| layered, 9 kernels per layer | %s weights, PDL %s | %.1f | %.2f | %.0f | %.1f%% |\n", with_w ? "with" : "no",
                    pdl ? "on" : "off", us, us / kLayers, with_w ? wtotal / (us * 1e-6) / 1e9 : 0.0, pct(us));
        CK(cudaGraphExecDestroy(ge));
        CK(cudaGraphDestroy(g));
      }
  }
  CK(cudaDeviceSynchronize());
  std::printf("\n(%% of roofline: the step's weight bytes / copy bandwidth over (30 layers + the lm_head read); the real step also\n"
              "has the arithmetic, the final norm and the sampling)\n");
  return 0;
}
