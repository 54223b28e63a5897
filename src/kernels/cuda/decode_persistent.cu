// tritium kernels/cuda: the persistent decode kernel (design in decode_persistent.h).
#include "kernels/cuda/decode_persistent.h"

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/attention_block.cuh"
#include "kernels/cuda/kernels.h"
#include "kernels/cuda/row_ops.cuh"
#include "kernels/cuda/tc2_dot.cuh"
#include "kernels/cuda/tcb_mma.cuh"

namespace tritium::cuda {
namespace {

constexpr int kThreads = 256;       // the block size attention_block expects
constexpr int kMaxVec = 8;          // float4 per thread in the row prologues: rows up to 8 * 4 * 256 = 8192
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900  // device code below: sm_90 only (see the kernel)
constexpr int kAttnU = 3;  // attention positions per 8-lane group in flight (4 spills registers)


// ---- weight prefetch: bulk asynchronous copies (TMA, sm_90) into shared memory, one mbarrier per slot ----
// One thread issues the copy of a whole contiguous slice; the other threads never stall on it. A slot's
// mbarrier completes one phase per layer (parity l & 1) when the slice's bytes have landed.
__device__ __forceinline__ unsigned smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void mbar_init(uint64_t* bar) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(smem_addr(bar)) : "memory");
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");  // visible to the async proxy
}
/// Thread 0 only: copies `bytes` (a multiple of 16, 16-byte aligned ends) from global src to shared dst, and
/// bytes2 from src2 to dst2 (bytes2 may be 0), and completes the current phase of `bar` when they have arrived
/// (at once when bytes == 0).
__device__ __forceinline__ void bulk_load(void* dst, const void* src, uint32_t bytes, uint64_t* bar,
                                          void* dst2 = nullptr, const void* src2 = nullptr, uint32_t bytes2 = 0) {
  // Earlier generic-proxy reads of dst (the previous layer's GEMV) before the async-proxy writes.
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
  if (bytes == 0) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_addr(bar)) : "memory");
    return;
  }
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(bytes + bytes2)
               : "memory");
  auto copy = [&](void* d, const void* s, uint32_t n) {
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
            smem_addr(d)),
        "l"(s), "r"(n), "r"(smem_addr(bar))
        : "memory");
  };
  copy(dst, src, bytes);
  if (bytes2) copy(dst2, src2, bytes2);
}
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(smem_addr(bar)), "r"(parity)
        : "memory");
  } while (!done);
}

/// Requests this block's rows of projection p ([blockIdx.x * rpb, + rpb) clipped to p.n) into `slot` (thread 0
/// issues one bulk copy; `bar` completes when they have landed).
/// tcb: rpb is a multiple of 16 and the padded rows up to the tile boundary are copied too (a row takes kp / 4
/// bytes in both layouts, and tile r0 / 16 starts at row r0's offset).
/// tcb: the rows' -1 counts (int32) go to negs in the same copy.
__device__ __forceinline__ void load_rows(const PersistentProj& p, int rpb, uint4* slot, int32_t* negs,
                                          uint64_t* bar) {
  if (threadIdx.x != 0) return;
  const int nch = p.kp / 64;
  const int r0 = static_cast<int>(blockIdx.x) * rpb;
  const int np = p.negc ? (p.n + 15) / 16 * 16 : p.n;
  const int rows = max(0, min(np, r0 + rpb) - r0);
  bulk_load(slot, reinterpret_cast<const uint4*>(p.w) + static_cast<int64_t>(r0) * nch,
            static_cast<uint32_t>(rows) * nch * 16u, bar, negs, p.negc ? p.negc + r0 : nullptr,
            p.negc ? static_cast<uint32_t>(rows) * 4u : 0u);
}

// ---- grid barrier: one counter; thread 0 of each block adds 1 (release, cumulative over the block's writes that
// the __syncthreads before it ordered) and polls it (acquire) until it reaches epoch * gridDim.x. Measured faster
// than a flag per block polled by every block (bench/CUDA_NOTES.md, version 9). ----
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

/// The row prologue of a projection, computed by every block for itself: v = src (MODE 0) or the GLU of
/// src = [gate | up] (MODE 1 relu^2, 2 SiLU), then RMSNorm with weight w (skipped when w is null), then absmax
/// int8 quantization into xs in the GEMV's order (chunk c of 64 values, quarter q: 16-byte word q * nch + c),
/// zero past n up to nch * 64. Same float operations and reduction order as norm_quant_vec_kernel.
/// Returns 1 / scale in inv_s and the sum of the quantized values in sumq (every thread).
/// TCB: xs receives the activation bit planes instead (ternary_tcb.h: [nch / 4 chunks][32 lanes][2] uint32).
template <int MODE, bool TCB>
__device__ __forceinline__ void row_prologue(const float* src, int n, const float* __restrict__ w, float eps,
                                             int nch, uint8_t* xs, RowScratch<kThreads>& red, float& inv_s,
                                             int& sumq) {
  const int n4 = n / 4;
  float4 wv[kMaxVec];  // the norm weights first: their loads overlap those of the activations
  if (w) row_load_weight<kThreads>(w, n4, wv);
  float4 v[kMaxVec];
  row_load<kThreads, kMaxVec, MODE, true>(src, n4, v);
  if (w) row_rms_norm<kThreads>(v, wv, n, eps, red);
  auto at = [&](int i) {  // the 4 bytes of values 4i .. 4i + 3
    const int d = 4 * i;
    return reinterpret_cast<uint32_t*>(xs + ((((d >> 4) & 3) * nch + (d >> 6)) << 4) + (d & 15));
  };
  if constexpr (TCB) {
    uint32_t cw[kMaxVec];
#pragma unroll
    for (int j = 0; j < kMaxVec; ++j) cw[j] = 0u;
    row_quantize<kThreads>(v, n4, red, [&](int j, int, uint32_t word) { cw[j] = word; }, inv_s, sumq);
    row_planes<kThreads, kMaxVec>(cw, nch / 2, reinterpret_cast<uint32_t*>(xs));
    __syncthreads();  // the planes are read by every warp
  } else {
    for (int i = n4 + static_cast<int>(threadIdx.x); i < nch * 16; i += kThreads) *at(i) = 0u;
    // The quantization's last reduction barrier also publishes xs to the block.
    row_quantize<kThreads>(v, n4, red, [&](int, int i, uint32_t word) { *at(i) = word; }, inv_s, sumq);
  }
}

/// The 64 weights of chunk c (codes wv) times the activations of chunk c (xs in the GEMV's order), into the
/// four group accumulators of tc2_dot.cuh.
__device__ __forceinline__ void dot_chunk(const uint4 wv, const uint4* xs, int nch, int c, int (&acc)[4]) {
  tc2_dot_word(wv.x, xs[c], acc);
  tc2_dot_word(wv.y, xs[nch + c], acc);
  tc2_dot_word(wv.z, xs[2 * nch + c], acc);
  tc2_dot_word(wv.w, xs[3 * nch + c], acc);
}

/// The output row of a projection: y[row] = (float(v) * inv_s) * segment scale, or += (add); v the exact sum.
__device__ __forceinline__ void store_row(const PersistentProj& p, int row, int v, float inv_s, float* y, bool add) {
  const float sc = row < p.seg_end[0] ? p.seg_scale[0] : (row < p.seg_end[1] ? p.seg_scale[1] : p.seg_scale[2]);
  const float val = __fmul_rn(__fmul_rn(static_cast<float>(v), inv_s), sc);
  y[row] = add ? __fadd_rn(__ldcg(y + row), val) : val;
}

/// This block's rows of projection p from its shared-memory slot: 8 lanes per row (4 rows per warp), lane sub
/// takes the 64-weight chunks sub, sub + 8, ...; dp4a of the masked codes c = w + 1 with the int8 activations, minus
/// sumq, then the epilogue of ternary_matmul: y[row] = (float(acc) * inv_s) * segment scale, or += (add).
__device__ __forceinline__ void gemv_rows(const PersistentProj& p, int rpb, const uint4* slot, const uint4* xs,
                                          int sumq, float inv_s, float* y, bool add) {
  const int nch = p.kp / 64;
  const int r0 = static_cast<int>(blockIdx.x) * rpb;
  const int rows = max(0, min(p.n, r0 + rpb) - r0);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 8, sub = lane % 8;
  for (int rb = warp * 4; rb < rows; rb += kThreads / 8) {  // uniform over the warp: shuffles below are safe
    const int rr = rb + g;
    int acc = 0;
    if (rr < rows) {
      const uint4* wr = slot + rr * nch;
      int g4[4] = {0, 0, 0, 0};  // four independent dependency chains (the code groups)
      for (int c = sub; c < nch; c += 8) dot_chunk(wr[c], xs, nch, c, g4);
      acc = tc2_combine(g4);
    }
    acc += __shfl_xor_sync(0xffffffffu, acc, 1);
    acc += __shfl_xor_sync(0xffffffffu, acc, 2);
    acc += __shfl_xor_sync(0xffffffffu, acc, 4);
    if (sub == 0 && rr < rows) store_row(p, r0 + rr, acc - sumq, inv_s, y, add);
  }
}

/// tcb: this block's 16-row tiles of projection p (rpb / 16 of them, from tile blockIdx.x * rpb / 16) from its
/// shared-memory slot ([tile][chunk][plane][32 lanes] uint4 A fragments) times the bit planes xp ([chunk][32
/// lanes] uint2): two binary MMAs per chunk (P with the planes, N with their complement), plus the row's -1 count
/// (negs: the slice's counts, copied with the weights).
/// With fewer tiles than warps, each tile's chunks are split over kThreads / 32 / tiles warps and summed in red
/// ([warps][16]); with more, each warp takes tiles warp, warp + warps, ...
__device__ __forceinline__ void gemv_tiles_tcb(const PersistentProj& p, int rpb, const uint4* slot,
                                               const int32_t* negs, const uint2* xp, float inv_s, float* y, bool add,
                                               int* red) {
  constexpr int W = kThreads / 32;
  const int kc = p.kp / 256, tpb = rpb / 16;
  const int t0 = static_cast<int>(blockIdx.x) * tpb;
  const int nt = max(0, min((p.n + 15) / 16, t0 + tpb) - t0);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4;
  const int wpt = tpb >= W ? 1 : W / tpb;  // warps per tile
  auto dot = [&](int tl, int ca, int cb, int& lo, int& hi) {
    int acc[4] = {0, 0, 0, 0}, acc2[4] = {0, 0, 0, 0};  // two independent MMA chains
    const uint4* wt = slot + static_cast<int64_t>(tl) * kc * 64 + lane;
    for (int c = ca; c < cb; ++c) {
      const uint2 b = xp[c * 32 + lane];
      bmma_and(acc, wt[c * 64], b.x, b.y);
      bmma_and(acc2, wt[c * 64 + 32], ~b.x, ~b.y);
    }
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[e] += acc2[e];
    tcb_rows(acc, lo, hi);
  };
  auto store = [&](int tl, int lo, int hi) {
    const int r0 = (t0 + tl) * 16 + g, r1 = r0 + 8;
    if (r0 < p.n) store_row(p, r0, lo + negs[tl * 16 + g], inv_s, y, add);
    if (r1 < p.n) store_row(p, r1, hi + negs[tl * 16 + g + 8], inv_s, y, add);
  };
  if (wpt == 1) {
    for (int tl = warp; tl < nt; tl += W) {
      int lo, hi;
      dot(tl, 0, kc, lo, hi);
      if (lane % 4 == 0) store(tl, lo, hi);
    }
    return;
  }
  const int tl = warp / wpt, part = warp % wpt;
  const int cpp = (kc + wpt - 1) / wpt, c0 = min(kc, part * cpp), c1 = min(kc, c0 + cpp);
  int lo = 0, hi = 0;
  if (tl < nt) dot(tl, c0, c1, lo, hi);
  if (lane % 4 == 0) red[warp * 16 + g] = lo, red[warp * 16 + g + 8] = hi;
  __syncthreads();
  if (part == 0 && tl < nt && lane % 4 == 0) {
    for (int q = 1; q < wpt; ++q) lo += red[(warp + q) * 16 + g], hi += red[(warp + q) * 16 + g + 8];
    store(tl, lo, hi);
  }
}

#endif

template <int D, bool TCB>
__global__ void __launch_bounds__(kThreads, 1) decode_persistent_kernel(PersistentDecodeArgs a,
                                                                        PersistentDecodePlan pl) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900  // bulk copies and mbarrier transaction counts: sm_90
  extern __shared__ uint4 smem[];
  __shared__ RowScratch<kThreads> red;
  __shared__ int tcb_red[kThreads / 32 * 16];
  uint4* slot[4] = {smem + pl.slot_off[0], smem + pl.slot_off[1], smem + pl.slot_off[2], smem + pl.slot_off[3]};
  int32_t* negs[4];  // tcb: the slices' -1 counts
  for (int k = 0; k < 4; ++k) negs[k] = reinterpret_cast<int32_t*>(smem + pl.neg_off[k]);
  uint4* xs = smem + pl.xs_off;
  uint8_t* xs8 = reinterpret_cast<uint8_t*>(xs);
  const int qd = a.H * D, qkvw = qd + 2 * a.KVH * D;
  const int G = static_cast<int>(gridDim.x);
  auto projs = [](const PersistentLayer& L, int k) -> const PersistentProj& {
    return k == 0 ? L.qkv : (k == 1 ? L.o : (k == 2 ? L.gate_up : L.down));
  };
  // Attention metadata of this step, constant over the layers, staged once: position, sequence (row 0 of the
  // staged block table), the block table and the RoPE rows (two dependent global round trips fewer per layer).
  __shared__ int32_t meta_s[2];
  __shared__ float rope_s[2][D / 2];
  int32_t* table_s = reinterpret_cast<int32_t*>(smem + pl.table_off);
  {
    const int pos = a.pos[0];
    const int32_t* bt_row = a.bt + static_cast<int64_t>(a.seq[0]) * a.bt_width;
    if (threadIdx.x == 0) meta_s[0] = pos, meta_s[1] = 0;
    for (int i = threadIdx.x; i < a.bt_width; i += kThreads) table_s[i] = bt_row[i];
    for (int i = threadIdx.x; i < D / 2; i += kThreads) {
      rope_s[0][i] = a.cos_t[static_cast<int64_t>(pos) * (D / 2) + i];
      rope_s[1][i] = a.sin_t[static_cast<int64_t>(pos) * (D / 2) + i];
    }
  }
  // Weight slots: one mbarrier each (one phase per layer: parity l & 1). Each phase's slice is requested by
  // thread 0 at the start of the phase and lands while the block computes the row prologue. Requesting it a
  // layer ahead measured slower: the bulk copies then share the SM's memory path with the latency-bound
  // prologue and barrier loads (CUDA_NOTES, version 9).
  __shared__ uint64_t wbar[4];
  if (threadIdx.x == 0)
    for (int k = 0; k < 4; ++k) mbar_init(&wbar[k]);
  __syncthreads();
  uint32_t epoch = 0;  // barriers passed = phases completed
  const bool stamp = a.timing != nullptr && blockIdx.x == 0 && threadIdx.x == 0;
  auto mark = [&](int j) {  // profile: stamp j of the current phase
    if (stamp) a.timing[3 * epoch + j] = clock64();
  };
  mark(0);
  auto sync = [&] {
    grid_sync(a.flags, ++epoch);
    mark(0);
  };
  float inv_s = 1.0f;
  int sumq = 0;
  // A projection phase: request the slice, the row prologue (by the caller, in between), wait, multiply.
  auto request = [&](int l, int k) {
    load_rows(projs(a.layers[l], k), pl.rows_per_block[k], slot[k], negs[k], &wbar[k]);
  };
  auto project = [&](int l, int k, float* y, bool add) {
    mark(1);
    mbar_wait(&wbar[k], static_cast<uint32_t>(l & 1));
    if (TCB) {
      gemv_tiles_tcb(projs(a.layers[l], k), pl.rows_per_block[k], slot[k], negs[k],
                     reinterpret_cast<const uint2*>(xs), inv_s, y, add, tcb_red);
    } else {
      gemv_rows(projs(a.layers[l], k), pl.rows_per_block[k], slot[k], xs, sumq, inv_s, y, add);
    }
    __syncthreads();  // the slot and xs are free again
    mark(2);
  };
  for (int l = 0; l < a.num_layers; ++l) {
    const PersistentLayer& L = a.layers[l];
    float* kpool = a.kv_base + 2 * static_cast<int64_t>(l) * a.kv_pool;
    float* vpool = kpool + a.kv_pool;
    // Q: input RMSNorm + quantization, qkv rows.
    request(l, 0);
    row_prologue<0, TCB>(a.x, a.hidden, L.in_norm, a.eps, L.qkv.kp / 64, xs8, red, inv_s, sumq);
    project(l, 0, a.qkv, false);
    sync();
    // A: attention items (head, chunk), RoPE and the KV write inside.
    for (int it = blockIdx.x; it < a.H * a.nsplit; it += G) {
      const int h = it / a.nsplit, z = it % a.nsplit;
      // kAttnU positions per lane group in flight: a 96-position context in one step.
      if (a.nsplit > 1) {
        attention_block<D, true, true, kAttnU>(0, h, z, a.qkv, qkvw, a.H, a.KVH, meta_s, meta_s + 1, table_s,
                                          a.bt_width, a.block_size, kpool, vpool, a.attn, a.scale, rope_s[0],
                                          rope_s[1], a.nsplit, a.part, a.cnt, 0);
      } else {
        attention_block<D, true, false, kAttnU>(0, h, 0, a.qkv, qkvw, a.H, a.KVH, meta_s, meta_s + 1, table_s,
                                           a.bt_width, a.block_size, kpool, vpool, a.attn, a.scale, rope_s[0],
                                           rope_s[1], 1, nullptr, nullptr, 0);
      }
      __syncthreads();  // the item's shared state is reused by the next one
    }
    mark(1);
    mark(2);
    sync();
    // O: attn_sub_norm + quantization, o rows, residual.
    request(l, 1);
    row_prologue<0, TCB>(a.attn, qd, L.attn_sub, a.eps, L.o.kp / 64, xs8, red, inv_s, sumq);
    project(l, 1, a.x, true);
    sync();
    // G: post-attention RMSNorm + quantization, gate_up rows.
    request(l, 2);
    row_prologue<0, TCB>(a.x, a.hidden, L.post_norm, a.eps, L.gate_up.kp / 64, xs8, red, inv_s, sumq);
    project(l, 2, a.gu, false);
    sync();
    // D: GLU + ffn_sub_norm + quantization, down rows, residual.
    request(l, 3);
    if (a.relu2) row_prologue<1, TCB>(a.gu, a.inter, L.ffn_sub, a.eps, L.down.kp / 64, xs8, red, inv_s, sumq);
    else row_prologue<2, TCB>(a.gu, a.inter, L.ffn_sub, a.eps, L.down.kp / 64, xs8, red, inv_s, sumq);
    project(l, 3, a.x, true);
    if (l + 1 < a.num_layers) sync();
  }
  ++epoch;
  mark(0);
#else
  __trap();  // never launched: plan_persistent_decode refuses devices below compute capability 9.0
#endif
}

void* kernel_ptr(int D, bool tcb) {
  if (tcb)
    return D == 64 ? reinterpret_cast<void*>(decode_persistent_kernel<64, true>)
                   : reinterpret_cast<void*>(decode_persistent_kernel<128, true>);
  return D == 64 ? reinterpret_cast<void*>(decode_persistent_kernel<64, false>)
                 : reinterpret_cast<void*>(decode_persistent_kernel<128, false>);
}

}  // namespace

bool plan_persistent_decode(const PersistentLayer& l0, int hidden, int inter, int H, int KVH, int D,
                            PersistentDecodePlan& plan, const char*& why) {
  plan = PersistentDecodePlan{};
  if (D != 64 && D != 128) return why = "head_dim is not 64 or 128", false;
  if (KVH <= 0 || H % KVH != 0) return why = "heads", false;
  const int qd = H * D;
  constexpr int kMaxRow = kMaxVec * 4 * kThreads;
  if (hidden % 4 || inter % 4 || hidden > kMaxRow || inter > kMaxRow || qd > kMaxRow)
    return why = "a row is longer than 8192 or not a multiple of 4", false;
  const PersistentProj* ps[4] = {&l0.qkv, &l0.o, &l0.gate_up, &l0.down};
  const int ks[4] = {hidden, qd, hidden, inter};
  const int ns[4] = {qd + 2 * KVH * D, hidden, 2 * inter, hidden};
  const bool tcb = l0.qkv.negc != nullptr;
  const int align = tcb ? 256 : 64;  // kp: whole MMA k-steps (tcb) or 64-weight chunks (tc2)
  for (int k = 0; k < 4; ++k) {
    if ((ps[k]->negc != nullptr) != tcb) return why = "the projections mix the tc2 and tcb layouts", false;
    if (ps[k]->n != ns[k] || ps[k]->kp < ks[k] || ps[k]->kp % align || ps[k]->kp > ks[k] + align - 1)
      return why = "projection shapes", false;
  }
  int dev = 0, sms = 0, coop = 0, optin = 0;
  check(cudaGetDevice(&dev), "cudaGetDevice");
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev), "cudaDeviceGetAttribute");
  check(cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, dev), "cudaDeviceGetAttribute");
  check(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev), "cudaDeviceGetAttribute");
  if (!coop) return why = "the device has no cooperative launch", false;
  int major = 0;
  check(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev), "cudaDeviceGetAttribute");
  if (major < 9) return why = "needs compute capability 9.0 (bulk copies)", false;
  plan.grid = sms;
  int off = 0, max_kp = 0;
  for (int k = 0; k < 4; ++k) {
    // tcb: whole 16-row tiles per block.
    plan.rows_per_block[k] = tcb ? 16 * (((ps[k]->n + 15) / 16 + sms - 1) / sms) : (ps[k]->n + sms - 1) / sms;
    plan.slot_off[k] = off;
    off += plan.rows_per_block[k] * (ps[k]->kp / 64);
    plan.neg_off[k] = off;
    if (tcb) off += (plan.rows_per_block[k] * 4 + 15) / 16;
    max_kp = max_kp > ps[k]->kp ? max_kp : ps[k]->kp;
  }
  plan.xs_off = off;
  off += max_kp / 16;
  plan.table_off = off;  // the block table follows (its size is known at launch: persistent_decode adds it)
  plan.smem = static_cast<size_t>(off) * 16;
  plan.tcb = tcb;
  void* kern = kernel_ptr(D, tcb);
  cudaFuncAttributes fa{};
  check(cudaFuncGetAttributes(&fa, kern), "cudaFuncGetAttributes (persistent decode)");
  if (plan.smem + fa.sharedSizeBytes > static_cast<size_t>(optin))
    return why = "the weight slices do not fit the shared memory of one SM", false;
  plan.smem_max = static_cast<size_t>(optin) - fa.sharedSizeBytes;
  check(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(plan.smem_max)),
        "persistent decode smem attribute");
  int per_sm = 0;
  check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kern, kThreads, plan.smem), "occupancy");
  if (per_sm < 1) return why = "no block fits an SM", false;
  return true;
}

void persistent_decode(const PersistentDecodeArgs& args, const PersistentDecodePlan& plan, cudaStream_t stream) {
  if (plan.grid <= 0 || args.flags == nullptr || args.layers == nullptr || args.num_layers <= 0)
    check(cudaErrorInvalidValue, "persistent_decode (no plan)");
  if (args.nsplit < 1 || args.nsplit > kAttentionMaxSplit || (args.nsplit > 1 && (!args.part || !args.cnt)))
    check(cudaErrorInvalidValue, "persistent_decode (nsplit / split scratch)");
  check(cudaMemsetAsync(args.flags, 0, sizeof(uint32_t), stream), "cudaMemsetAsync (persistent decode barrier)");
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeCooperative;
  attr[0].val.cooperative = 1;
  const size_t smem = plan.smem + (static_cast<size_t>(args.bt_width) * sizeof(int32_t) + 15) / 16 * 16;
  if (args.bt_width <= 0 || smem > plan.smem_max)
    check(cudaErrorInvalidValue, "persistent_decode (block table does not fit the shared memory)");
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(plan.grid);
  cfg.blockDim = dim3(kThreads);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  if (args.D != 64 && args.D != 128) check(cudaErrorInvalidValue, "persistent_decode (head_dim)");
  if (plan.tcb) {
    if (args.D == 64) check(cudaLaunchKernelEx(&cfg, decode_persistent_kernel<64, true>, args, plan), "persistent decode");
    else check(cudaLaunchKernelEx(&cfg, decode_persistent_kernel<128, true>, args, plan), "persistent decode");
  } else {
    if (args.D == 64) check(cudaLaunchKernelEx(&cfg, decode_persistent_kernel<64, false>, args, plan), "persistent decode");
    else check(cudaLaunchKernelEx(&cfg, decode_persistent_kernel<128, false>, args, plan), "persistent decode");
  }
}

}  // namespace tritium::cuda
