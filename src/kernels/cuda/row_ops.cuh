// tritium kernels/cuda: the block-level row pipeline of the row kernels (ops.cu: norm_quant, glu_norm_quant) and the
// warp bit transpose of the tcb activation planes (also used by tcb_planes in ternary_tcb.cu), written with explicit
// rounding so that they produce the CPU reference's bits.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace tritium::cuda {

/// GLU of one element: mode 1 relu(g)^2 * u, mode 2 silu(g) * u (as kernels/cpu glu).
__device__ __forceinline__ float glu_one(float g, float u, int mode) {
  if (mode == 1) {
    const float rr = g > 0.0f ? g : 0.0f;
    return __fmul_rn(__fmul_rn(rr, rr), u);
  }
  return __fmul_rn(__fdiv_rn(g, __fadd_rn(1.0f, expf(-g))), u);
}

/// Absmax int8 quantization of one value with multiplier s: round half to even, clamp to [-128, 127].
__device__ __forceinline__ int quant_one(float v, float s) {
  const float t = rintf(__fmul_rn(v, s));
  return static_cast<int>(fminf(fmaxf(t, -128.0f), 127.0f));
}

/// Every thread of an NT-thread block gets op over the block: warp shuffles, then the NT / 32 warp values in
/// order (sm: [NT / 32] shared scratch, not reused by another reduction before the next __syncthreads).
template <int NT, class T, class Op>
__device__ __forceinline__ T block_all_reduce(T v, Op op, T* sm) {
#pragma unroll
  for (int off = 16; off > 0; off /= 2) v = op(v, __shfl_xor_sync(0xffffffffu, v, off));
  if (threadIdx.x % 32 == 0) sm[threadIdx.x / 32] = v;
  __syncthreads();
  T r = sm[0];
#pragma unroll
  for (int i = 1; i < NT / 32; ++i) r = op(r, sm[i]);
  return r;
}

struct AddOp {
  template <class T>
  __device__ T operator()(T a, T b) const { return a + b; }
};
struct MaxOp {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

/// Shared scratch of the row pipeline below (one per block).
template <int NT>
struct RowScratch {
  double d[NT / 32];
  float f[NT / 32];
  int i[NT / 32];
};

// The block-level row pipeline of norm_quant / glu_norm_quant (ops.cu): the row's n4 float4 are held in registers,
// thread t owning float4 t + j * NT in v[j] (j < VPT).

/// Loads the row: MODE 0 src itself, MODE 1 / 2 the GLU (relu^2 / SiLU) of src = [gate | up] (n4 float4 each);
/// zeros past n4.
template <int NT, int VPT, int MODE>
__device__ __forceinline__ void row_load(const float* src, int n4, float4 (&v)[VPT]) {
  const float4* s4 = reinterpret_cast<const float4*>(src);
#pragma unroll
  for (int j = 0; j < VPT; ++j) {
    const int i = static_cast<int>(threadIdx.x) + j * NT;
    v[j] = make_float4(0.f, 0.f, 0.f, 0.f);
    if (i < n4) {
      if (MODE == 0) {
        v[j] = s4[i];
      } else {
        const float4 g = s4[i], u = s4[n4 + i];
        v[j] = make_float4(glu_one(g.x, u.x, MODE), glu_one(g.y, u.y, MODE), glu_one(g.z, u.z, MODE),
                           glu_one(g.w, u.w, MODE));
      }
    }
  }
}

/// The dequantized value of an exact sum as the ternary epilogue computes it (ternary_epilogue.cuh,
/// epilogue_value): (float(a) * inv) * scale of column c's segment.
struct SumsRow {
  const int32_t* acc;  // the row's sums
  float inv;
  int e0, e1;
  float s0, s1, s2;
  __device__ __forceinline__ float value(int c, int32_t a) const {
    const float sc = c < e0 ? s0 : (c < e1 ? s1 : s2);
    return __fmul_rn(__fmul_rn(static_cast<float>(a), inv), sc);
  }
  __device__ __forceinline__ float4 value4(int i) const {  // float4 i: columns 4 i .. 4 i + 3
    const int4 a = reinterpret_cast<const int4*>(acc)[i];
    const int c = 4 * i;
    return make_float4(value(c, a.x), value(c + 1, a.y), value(c + 2, a.z), value(c + 3, a.w));
  }
};

/// SumsRow over the partial sums of a K-split GEMM (PendingSums::parts <= kMaxParts, `stride` int32 apart, a
/// multiple of 4): each int4 is the sum of every part's, all loads issued before the first add (unrolled and
/// predicated, so a row kernel waits one round trip, not one per part). The sums are exact integers.
struct SumsRowParts : SumsRow {
  static constexpr int kMaxParts = 4;
  int parts;
  int64_t stride;
  __device__ __forceinline__ float4 value4(int i) const {
    int4 b[kMaxParts];
#pragma unroll
    for (int p = 0; p < kMaxParts; ++p)
      b[p] = p < parts ? reinterpret_cast<const int4*>(acc + p * stride)[i] : make_int4(0, 0, 0, 0);
    int4 a = b[0];
#pragma unroll
    for (int p = 1; p < kMaxParts; ++p) a.x += b[p].x, a.y += b[p].y, a.z += b[p].z, a.w += b[p].w;
    const int c = 4 * i;
    return make_float4(value(c, a.x), value(c + 1, a.y), value(c + 2, a.z), value(c + 3, a.w));
  }
};

/// row_load from pending sums: MODE 0 the residual row x + value (x: the residual stream's row, updated in place
/// with the sums, as the epilogue's __fadd_rn), MODE 1 / 2 the GLU of gate = value(0..), up = value(4 n4..).
template <int NT, int VPT, int MODE, class Row>
__device__ __forceinline__ void row_load_sums(const Row& s, float* x, int n4, float4 (&v)[VPT]) {
#pragma unroll
  for (int j = 0; j < VPT; ++j) {
    const int i = static_cast<int>(threadIdx.x) + j * NT;
    v[j] = make_float4(0.f, 0.f, 0.f, 0.f);
    if (i < n4) {
      if (MODE == 0) {
        const float4 a = s.value4(i), r = reinterpret_cast<const float4*>(x)[i];
        v[j] = make_float4(__fadd_rn(r.x, a.x), __fadd_rn(r.y, a.y), __fadd_rn(r.z, a.z), __fadd_rn(r.w, a.w));
        reinterpret_cast<float4*>(x)[i] = v[j];
      } else {
        const float4 g = s.value4(i), u = s.value4(n4 + i);
        v[j] = make_float4(glu_one(g.x, u.x, MODE), glu_one(g.y, u.y, MODE), glu_one(g.z, u.z, MODE),
                           glu_one(g.w, u.w, MODE));
      }
    }
  }
}

/// Loads the norm weight w [4 n4] (constant data: may be read before the programmatic-dependent-launch wait).
template <int NT, int VPT>
__device__ __forceinline__ void row_load_weight(const float* __restrict__ w, int n4, float4 (&wv)[VPT]) {
#pragma unroll
  for (int j = 0; j < VPT; ++j) {
    const int i = static_cast<int>(threadIdx.x) + j * NT;
    if (i < n4) wv[j] = __ldg(reinterpret_cast<const float4*>(w) + i);
  }
}

/// RMSNorm in place as kernels/cpu rms_norm: sum of squares in double, inv = 1 / sqrt(ss / n + eps),
/// v = w * (v * inv) with explicit rounding.
template <int NT, int VPT>
__device__ __forceinline__ void row_rms_norm(float4 (&v)[VPT], const float4 (&wv)[VPT], int n, float eps,
                                             RowScratch<NT>& sm) {
  const int n4 = n / 4;
  double ss = 0.0;
#pragma unroll
  for (int j = 0; j < VPT; ++j) {
    const double a = v[j].x, b = v[j].y, c = v[j].z, d = v[j].w;
    ss += a * a + b * b + c * c + d * d;
  }
  ss = block_all_reduce<NT>(ss, AddOp{}, sm.d);
  const float inv = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(static_cast<float>(ss / static_cast<double>(n)), eps)));
#pragma unroll
  for (int j = 0; j < VPT; ++j) {
    if (static_cast<int>(threadIdx.x) + j * NT < n4) {
      v[j].x = __fmul_rn(wv[j].x, __fmul_rn(v[j].x, inv));
      v[j].y = __fmul_rn(wv[j].y, __fmul_rn(v[j].y, inv));
      v[j].z = __fmul_rn(wv[j].z, __fmul_rn(v[j].z, inv));
      v[j].w = __fmul_rn(wv[j].w, __fmul_rn(v[j].w, inv));
    }
  }
}

/// Per-token absmax int8 quantization as quantize_rows_absmax_i8: s = 127 / max(amax, 1e-5); store(j, i, word)
/// receives the 4 codes of float4 i = threadIdx.x + j * NT packed little-endian (called for i < n4 only). Every thread gets
/// inv_s = 1 / s and sumq = the sum of the codes; the last reduction's barrier orders the stores before it.
template <int NT, int VPT, class Store>
__device__ __forceinline__ void row_quantize(const float4 (&v)[VPT], int n4, RowScratch<NT>& sm, Store store,
                                             float& inv_s, int& sumq) {
  float amax = 0.0f;
#pragma unroll
  for (int j = 0; j < VPT; ++j)
    amax = fmaxf(amax, fmaxf(fmaxf(fabsf(v[j].x), fabsf(v[j].y)), fmaxf(fabsf(v[j].z), fabsf(v[j].w))));
  amax = block_all_reduce<NT>(amax, MaxOp{}, sm.f);
  const float s = __fdiv_rn(127.0f, fmaxf(amax, 1e-5f));
  int sum = 0;
#pragma unroll
  for (int j = 0; j < VPT; ++j) {
    const int i = static_cast<int>(threadIdx.x) + j * NT;
    if (i < n4) {
      const int a = quant_one(v[j].x, s), b = quant_one(v[j].y, s), c = quant_one(v[j].z, s),
                d = quant_one(v[j].w, s);
      sum += a + b + c + d;
      store(j, i, (static_cast<uint32_t>(a) & 0xffu) | ((static_cast<uint32_t>(b) & 0xffu) << 8) |
                   ((static_cast<uint32_t>(c) & 0xffu) << 16) | (static_cast<uint32_t>(d) << 24));
    }
  }
  sum = block_all_reduce<NT>(sum, AddOp{}, sm.i);
  inv_s = __fdiv_rn(1.0f, s);
  sumq = sum;
}

/// The tcb activation bit planes (ternary_tcb.h) of 128-value blocks held by a warp: lane L's word cw[j] holds
/// the 4 codes of k = 128 blk_j + 4 L .. + 3, blk_j = blk0 + j * stride (warp-uniform); the plane word of lane
/// p * 4 + b (plane p, byte b) has bit L = bit p of byte b of lane L's word, i.e. a 32 x 32 bit transpose across
/// the warp: five shuffle stages (each swaps the off-diagonal blocks of one size: a shuffle, a rotate and a bit
/// select), then one shuffle from lane 8 b + p. Stored for blk_j < nblk into xb [nblk / 2 chunks][32 lanes][2
/// halves]. The V words go through each stage together, so their shuffle latencies overlap (a branch per word
/// inside the stages measured slower than one word after the other). Every lane of the warp must call it. (A warp
/// ballot per (plane, byte) instead, 32 ballots and selects per word, costs +1.1 us on a 2560-wide row and +2.9 us
/// on a 6912-wide one: bench/CUDA_NOTES.md, "Row kernels: normalization, quantization, bit planes".)
template <int V>
__device__ __forceinline__ void warp_planes(const uint32_t (&cw)[V], int blk0, int stride, int nblk,
                                            uint32_t* __restrict__ xb) {
  const int lane = static_cast<int>(threadIdx.x) % 32;
  uint32_t x[V];
#pragma unroll
  for (int j = 0; j < V; ++j) x[j] = cw[j];
#pragma unroll
  for (int s = 16; s >= 1; s /= 2) {
    // Stage s swaps bit k of lane L with bit k ^ s of lane L ^ s wherever bit s of L differs from bit s of k.
    const uint32_t m = s == 16 ? 0x0000ffffu : s == 8 ? 0x00ff00ffu : s == 4 ? 0x0f0f0f0fu : s == 2 ? 0x33333333u
                                                                                                 : 0x55555555u;
    const bool hi = (lane & s) != 0;
    const uint32_t keep = hi ? ~m : m;
    const int rot = hi ? 32 - s : s;
#pragma unroll
    for (int j = 0; j < V; ++j) {  // no branch here (words past the row are 0): the shuffles stay in lockstep
      const uint32_t y = __shfl_xor_sync(0xffffffffu, x[j], s);
      x[j] = (x[j] & keep) | (__funnelshift_l(y, y, rot) & ~keep);  // rotate: the masked bits need no wrap
    }
  }
  // Lane k now holds bit k of every lane's word (bit L from lane L); lane p * 4 + b takes k = 8 b + p.
  const int src = 8 * (lane % 4) + lane / 4;
#pragma unroll
  for (int j = 0; j < V; ++j) {
    const int blk = blk0 + j * stride;
    if (blk >= nblk) continue;
    xb[(blk / 2) * 64 + lane * 2 + blk % 2] = __shfl_sync(0xffffffffu, x[j], src);
  }
}

/// The tcb activation bit planes of one quantized row held by an NT-thread block as row_quantize leaves it:
/// cw[j] holds the 4 codes of float4 threadIdx.x + j * NT (0 past the row), so warp w holds the 128 consecutive k
/// of block w + j * NT / 32. xb [nblk / 2][32][2] (nblk = kp / 128). Every thread of the block must call it.
template <int NT, int VPT>
__device__ __forceinline__ void row_planes(const uint32_t (&cw)[VPT], int nblk, uint32_t* __restrict__ xb) {
  warp_planes<VPT>(cw, static_cast<int>(threadIdx.x) / 32, NT / 32, nblk, xb);
}

}  // namespace tritium::cuda
