// tritium kernels/cuda: row-wise and element-wise transformer operations (float32 activations).
// Multiplications and additions that the CPU reference does as separate float operations use __fmul_rn /
// __fadd_rn here so that the compiler does not contract them into FMAs (bit-equal results where the inputs are).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/kernels.h"
#include "kernels/cuda/kv_elem.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/row_ops.cuh"

namespace tritium::cuda {
namespace {

constexpr int kThreads = 256;

template <class T, class Op>
__device__ T block_reduce(T v, Op op, T* smem /* [32] */) {
#pragma unroll
  for (int off = 16; off > 0; off /= 2) v = op(v, __shfl_xor_sync(0xffffffffu, v, off));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();  // smem may still be read by a previous reduction
  if (lane == 0) smem[warp] = v;
  __syncthreads();
  const int nw = blockDim.x / 32;
  T r = smem[0];
  for (int i = 1; i < nw; ++i) r = op(r, smem[i]);
  return r;
}

__global__ void __launch_bounds__(kThreads) norm_quant_kernel(const float* __restrict__ x, int64_t ldx,
                                                              const int32_t* __restrict__ row_map,
                                                              const float* __restrict__ weight, int D, float eps,
                                                              float* __restrict__ y, __nv_bfloat16* __restrict__ yb,
                                                              int8_t* __restrict__ q, int kp,
                                                              float* __restrict__ inv_s, int32_t* __restrict__ sumq) {
  pdl_trigger();
  pdl_wait();
  __shared__ double sd[32];
  __shared__ float sf[32];
  __shared__ int si[32];
  const int r = blockIdx.x;
  const int src = row_map ? row_map[r] : r;
  const float* xr = x + static_cast<int64_t>(src) * ldx;
  float inv = 1.0f;
  if (weight) {
    double ss = 0.0;
    for (int d = threadIdx.x; d < D; d += kThreads) ss += static_cast<double>(xr[d]) * static_cast<double>(xr[d]);
    ss = block_reduce(ss, AddOp{}, sd);
    inv = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(static_cast<float>(ss / static_cast<double>(D)), eps)));
  }
  auto val = [&](int d) { return weight ? __fmul_rn(weight[d], __fmul_rn(xr[d], inv)) : xr[d]; };
  if (y || yb) {
    for (int d = threadIdx.x; d < D; d += kThreads) {
      const float v = val(d);
      if (y) y[static_cast<int64_t>(r) * D + d] = v;
      if (yb) yb[static_cast<int64_t>(r) * D + d] = __float2bfloat16_rn(v);
    }
  }
  if (!q) return;
  float amax = 0.0f;
  for (int d = threadIdx.x; d < D; d += kThreads) amax = fmaxf(amax, fabsf(val(d)));
  amax = block_reduce(amax, MaxOp{}, sf);
  const float s = __fdiv_rn(127.0f, fmaxf(amax, 1e-5f));
  int sum = 0;
  int8_t* qr = q + static_cast<int64_t>(r) * kp;
  for (int d = threadIdx.x; d < kp; d += kThreads) {
    int qi = 0;
    if (d < D) {
      const float t = rintf(__fmul_rn(val(d), s));
      qi = static_cast<int>(fminf(fmaxf(t, -128.0f), 127.0f));
    }
    qr[d] = static_cast<int8_t>(qi);
    sum += qi;
  }
  sum = block_reduce(sum, AddOp{}, si);
  if (threadIdx.x == 0) {
    inv_s[r] = __fdiv_rn(1.0f, s);
    sumq[r] = sum;
  }
}

// One block of kVecThreads per row with the row in registers: VPT float4 per thread, loaded once (all loads in
// flight together), then three one-barrier reductions (sum of squares in double, absmax, sum of q). Same
// float operations as norm_quant_kernel, so the same results. MODE 0: the row of x; MODE 1 / 2: the GLU
// output relu(g)^2 * u / silu(g) * u of a gate_up row [g | u] (x = gu, ldx = 2 D) computed on the fly.
constexpr int kVecThreads = 256;

template <int VPT, int MODE>
__global__ void __launch_bounds__(kVecThreads) norm_quant_vec_kernel(
    const float* __restrict__ x, int64_t ldx, const int32_t* __restrict__ row_map, const float* __restrict__ weight,
    int D, float eps, float* __restrict__ y, int8_t* __restrict__ q, int kp, float* __restrict__ inv_s,
    int32_t* __restrict__ sumq, uint32_t* __restrict__ xb) {
  __shared__ RowScratch<kVecThreads> sm;
  const int r = blockIdx.x, tid = threadIdx.x, n4 = D / 4;
  float4 wv[VPT];
  if (weight) row_load_weight<kVecThreads>(weight, n4, wv);
  const int src = row_map ? row_map[r] : r;  // metadata: not written by kernels
  pdl_trigger();
  pdl_wait();
  float4 v[VPT];
  row_load<kVecThreads, VPT, MODE>(x + static_cast<int64_t>(src) * ldx, n4, v);
  if (weight) row_rms_norm<kVecThreads>(v, wv, D, eps, sm);
  if (y) {
#pragma unroll
    for (int j = 0; j < VPT; ++j) {
      const int i = tid + j * kVecThreads;
      if (i < n4) reinterpret_cast<float4*>(y + static_cast<int64_t>(r) * D)[i] = v[j];
    }
  }
  if (!q) return;
  uint32_t* qr = reinterpret_cast<uint32_t*>(q + static_cast<int64_t>(r) * kp);
  for (int i = n4 + tid; i < kp / 4; i += kVecThreads) qr[i] = 0u;
  float is = 1.0f;
  int sum = 0;
  uint32_t cw[VPT];
#pragma unroll
  for (int j = 0; j < VPT; ++j) cw[j] = 0u;
  row_quantize<kVecThreads>(v, n4, sm, [&](int j, int i, uint32_t word) { qr[i] = word; cw[j] = word; }, is, sum);
  if (xb) row_planes<kVecThreads, VPT>(cw, kp / 128, xb + static_cast<int64_t>(r) * (kp / 4));
  if (tid == 0) {
    inv_s[r] = is;
    sumq[r] = sum;
  }
}

// norm_quant_vec_kernel over pending sums (PendingSums): the row comes from row_load_sums. inv_s may be the
// pending sums' multipliers (p.inv_s): every thread reads its row's value before the first barrier, thread 0
// writes the new one after the last.
template <int VPT, int MODE, bool PARTS>
__global__ void __launch_bounds__(kVecThreads) norm_quant_sums_kernel(PendingSums p, const float* __restrict__ weight,
                                                                      int D, float eps, int8_t* __restrict__ q, int kp,
                                                                      float* inv_s, int32_t* __restrict__ sumq,
                                                                      uint32_t* __restrict__ xb) {
  __shared__ RowScratch<kVecThreads> sm;
  const int r = blockIdx.x, tid = threadIdx.x, n4 = D / 4;
  float4 wv[VPT];
  if (weight) row_load_weight<kVecThreads>(weight, n4, wv);
  pdl_trigger();
  pdl_wait();
  const SumsRow sr{p.acc + static_cast<int64_t>(r) * p.ldacc, p.inv_s[r], p.ep.seg_end[0], p.ep.seg_end[1],
                   p.ep.seg_scale[0], p.ep.seg_scale[1], p.ep.seg_scale[2]};
  float* xr = MODE == 0 ? p.ep.y + static_cast<int64_t>(r) * p.ep.ldy : nullptr;
  float4 v[VPT];
  if constexpr (PARTS) {
    row_load_sums<kVecThreads, VPT, MODE>(SumsRowParts{sr, p.parts, p.part_stride}, xr, n4, v);
  } else {
    row_load_sums<kVecThreads, VPT, MODE>(sr, xr, n4, v);
  }
  if (weight) row_rms_norm<kVecThreads>(v, wv, D, eps, sm);
  uint32_t* qr = reinterpret_cast<uint32_t*>(q + static_cast<int64_t>(r) * kp);
  for (int i = n4 + tid; i < kp / 4; i += kVecThreads) qr[i] = 0u;
  float is = 1.0f;
  int sum = 0;
  uint32_t cw[VPT];
#pragma unroll
  for (int j = 0; j < VPT; ++j) cw[j] = 0u;
  row_quantize<kVecThreads>(v, n4, sm, [&](int j, int i, uint32_t word) { qr[i] = word; cw[j] = word; }, is, sum);
  if (xb) row_planes<kVecThreads, VPT>(cw, kp / 128, xb + static_cast<int64_t>(r) * (kp / 4));
  if (tid == 0) {
    inv_s[r] = is;
    sumq[r] = sum;
  }
}

// Float4 per thread needed for D values; 0 when the vector kernel cannot take the row (more than 8).
int vec_per_thread(int D) {
  const int n4 = (D / 4 + kVecThreads - 1) / kVecThreads;
  if (n4 <= 1) return 1;
  if (n4 <= 2) return 2;
  if (n4 <= 3) return 3;
  if (n4 <= 4) return 4;
  if (n4 <= 8) return 8;
  return 0;
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

template <int MODE>
void launch_vec(int vpt, const float* x, int64_t ldx, const int32_t* row_map, const float* weight, int rows, int D,
                float eps, float* y, int8_t* q, int kp, float* inv_s, int32_t* sumq, uint32_t* xb, cudaStream_t st) {
  auto go = [&](auto kern) {
    launch(kern, dim3(rows), dim3(kVecThreads), 0, st, "norm_quant (vector)", x, ldx, row_map, weight, D, eps, y, q,
           kp, inv_s, sumq, xb);
  };
  switch (vpt) {
    case 1: go(norm_quant_vec_kernel<1, MODE>); break;
    case 2: go(norm_quant_vec_kernel<2, MODE>); break;
    case 3: go(norm_quant_vec_kernel<3, MODE>); break;
    case 4: go(norm_quant_vec_kernel<4, MODE>); break;
    default: go(norm_quant_vec_kernel<8, MODE>); break;
  }
}

__global__ void embedding_kernel(const float* __restrict__ table, const int32_t* __restrict__ tokens, int D,
                                 int vbegin, int vend, float* __restrict__ x) {
  pdl_trigger();
  pdl_wait();
  const int r = blockIdx.x;
  const int tok = tokens[r];
  float* dst = x + static_cast<int64_t>(r) * D;
  if (tok < vbegin || tok >= vend) {  // another rank's vocabulary slice: contributes zeros to the all-reduce
    for (int d = threadIdx.x; d < D; d += blockDim.x) dst[d] = 0.0f;
    return;
  }
  const float* src = table + static_cast<int64_t>(tok - vbegin) * D;
  for (int d = threadIdx.x; d < D; d += blockDim.x) dst[d] = src[d];
}

__global__ void embedding_stored_kernel(StoredEmbedding t, const int32_t* __restrict__ tokens, int D,
                                        float* __restrict__ x) {
  pdl_trigger();
  pdl_wait();
  const int r = blockIdx.x;
  const int64_t tok = tokens[r];
  float* dst = x + static_cast<int64_t>(r) * D;
  if (t.dtype == StoredEmbedding::kBF16) {
    const uint16_t* src = static_cast<const uint16_t*>(t.data) + tok * D;
    for (int d = threadIdx.x; d < D; d += blockDim.x) dst[d] = __uint_as_float(static_cast<uint32_t>(src[d]) << 16);
    return;
  }
  const uint8_t* row = static_cast<const uint8_t*>(t.data) + tok * (D / t.block) * t.block_bytes;
  for (int d = threadIdx.x; d < D; d += blockDim.x) {
    const uint8_t* blk = row + (d / t.block) * t.block_bytes;
    const int j = d % t.block;
    const float scale = __half2float(__ushort_as_half(static_cast<unsigned short>(blk[0] | (blk[1] << 8))));
    const int code = (blk[2 + j / 4] >> (2 * (j % 4))) & 3;
    dst[d] = __fmul_rn(static_cast<float>(code - 1), scale);
  }
}

template <class KT>
__global__ void rope_kv_kernel(float* __restrict__ qkv, int H, int KVH, int D, const float* __restrict__ cos_t,
                               const float* __restrict__ sin_t, const int32_t* __restrict__ pos,
                               const int32_t* __restrict__ seq, const int32_t* __restrict__ bt, int btw, int bs,
                               KT* __restrict__ kpool, KT* __restrict__ vpool, float kvs) {
  const int r = blockIdx.x, half = D / 2;
  const int qd = H * D, kvd = KVH * D;
  float* row = qkv + static_cast<int64_t>(r) * (qd + 2 * kvd);
  const int p = pos[r];
  const float* c = cos_t + static_cast<int64_t>(p) * half;
  const float* s = sin_t + static_cast<int64_t>(p) * half;
  const int64_t slot = (static_cast<int64_t>(bt[static_cast<int64_t>(seq[r]) * btw + p / bs]) * bs + p % bs) * kvd;
  pdl_trigger();  // positions, tables and cos/sin above are not written by kernels
  pdl_wait();
  for (int idx = threadIdx.x; idx < (H + KVH) * half; idx += blockDim.x) {
    const int hh = idx / half, i = idx % half;
    const bool is_k = hh >= H;
    float* v = row + (is_k ? qd + (hh - H) * D : hh * D);
    const float a = v[i], b = v[i + half];
    const float na = __fsub_rn(__fmul_rn(a, c[i]), __fmul_rn(b, s[i]));
    const float nb = __fadd_rn(__fmul_rn(b, c[i]), __fmul_rn(a, s[i]));
    v[i] = na;
    v[i + half] = nb;
    if (is_k) {
      KvIO<KT>::store(kpool + slot + (hh - H) * D + i, na, kvs);
      KvIO<KT>::store(kpool + slot + (hh - H) * D + i + half, nb, kvs);
    }
  }
  for (int d = threadIdx.x; d < kvd; d += blockDim.x) KvIO<KT>::store(vpool + slot + d, row[qd + kvd + d], kvs);
}

// One warp per head vector: sum of squares in double (warp order), y = w * (x * inv) as row_rms_norm. A row's
// first heads1 vectors take weight w1, the next heads2 weight w2 (Qwen3's q heads, then its k heads, in one launch).
__global__ void head_rms_norm_kernel(float* __restrict__ x, int rows, int64_t stride, int heads1, int heads2, int D,
                                     const float* __restrict__ w1, const float* __restrict__ w2, float eps) {
  pdl_trigger();
  pdl_wait();
  const int heads = heads1 + heads2;
  const int64_t vec = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x % 32);
  if (vec >= static_cast<int64_t>(rows) * heads) return;
  const int h = static_cast<int>(vec % heads);
  const float* __restrict__ w = h < heads1 ? w1 : w2;
  float* v = x + (vec / heads) * stride + static_cast<int64_t>(h) * D;
  double ss = 0.0;
  for (int d = lane; d < D; d += 32) {
    const double a = v[d];
    ss += a * a;
  }
  for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  const float inv = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(static_cast<float>(ss / static_cast<double>(D)), eps)));
  for (int d = lane; d < D; d += 32) v[d] = __fmul_rn(w[d], __fmul_rn(v[d], inv));
}

__global__ void glu_kernel(const float* __restrict__ gu, int rows, int I, int relu2, float* __restrict__ act) {
  pdl_trigger();
  pdl_wait();
  const int64_t total = static_cast<int64_t>(rows) * I;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t m = idx / I, i = idx % I;
    const float g = gu[m * 2 * I + i], u = gu[m * 2 * I + I + i];
    float out;
    if (relu2) {
      const float rr = g > 0.0f ? g : 0.0f;
      out = __fmul_rn(__fmul_rn(rr, rr), u);
    } else {
      out = __fmul_rn(__fdiv_rn(g, __fadd_rn(1.0f, expf(-g))), u);
    }
    act[idx] = out;
  }
}

__global__ void bias_add_kernel(const float* __restrict__ t, const float* __restrict__ bias, int rows, int n,
                                float* __restrict__ y, int add) {
  pdl_trigger();
  pdl_wait();
  const int64_t total = static_cast<int64_t>(rows) * n;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float v = t[idx];
    if (bias) v = __fadd_rn(v, bias[idx % n]);
    y[idx] = add ? __fadd_rn(y[idx], v) : v;
  }
}

__global__ void to_bf16_kernel(const float* __restrict__ x, int64_t n, __nv_bfloat16* __restrict__ out) {
  pdl_trigger();
  pdl_wait();
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[i] = __float2bfloat16_rn(x[i]);
}

__global__ void copy_kernel(const uint4* __restrict__ src, uint4* __restrict__ dst, int64_t n) {
  pdl_trigger();
  pdl_wait();
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    dst[i] = src[i];
}

int grid_for(int64_t total) {
  const int64_t b = (total + kThreads - 1) / kThreads;
  return static_cast<int>(b < 4096 ? (b > 0 ? b : 1) : 4096);
}

// PARTS: the sums of a K-split GEMM in p.parts parts (residual rows only: the GLU reads one part).
template <int MODE, bool PARTS = false>
void launch_sums(int vpt, const PendingSums& p, const float* weight, int rows, int D, float eps, int8_t* q, int kp,
                 float* inv_s, int32_t* sumq, uint32_t* xb, cudaStream_t st) {
  auto go = [&](auto kern) {
    launch(kern, dim3(rows), dim3(kVecThreads), 0, st, "norm_quant (pending sums)", p, weight, D, eps, q, kp, inv_s,
           sumq, xb);
  };
  switch (vpt) {
    case 1: go(norm_quant_sums_kernel<1, MODE, PARTS>); break;
    case 2: go(norm_quant_sums_kernel<2, MODE, PARTS>); break;
    case 3: go(norm_quant_sums_kernel<3, MODE, PARTS>); break;
    case 4: go(norm_quant_sums_kernel<4, MODE, PARTS>); break;
    default: go(norm_quant_sums_kernel<8, MODE, PARTS>); break;
  }
}

static_assert(SumsRowParts::kMaxParts == kMaxSumParts, "the readers of PendingSums unroll over kMaxSumParts");

// The partial sums of a K-split GEMM (at most kMaxSumParts) do not overlap.
bool parts_ok(const PendingSums& p, int rows) {
  return p.parts >= 1 && p.parts <= kMaxSumParts &&
         (p.parts == 1 || p.part_stride >= static_cast<int64_t>(rows) * p.ldacc);
}

// The pending sums can be read as int4 and the row kernel's float4 path applies.
bool sums_vec_ok(const PendingSums& p, int width, int vpt, int kp, const float* weight, const int8_t* q) {
  return vpt > 0 && width % 4 == 0 && p.ldacc % 4 == 0 && p.part_stride % 4 == 0 && kp % 4 == 0 &&
         aligned16(p.acc) && aligned16(weight) && aligned16(q) && aligned16(p.ep.y) && p.ep.ldy % 4 == 0;
}

}  // namespace

void residual_norm_quant(const PendingSums& p, int rows, int D, const float* weight, float eps, int8_t* q, int kp,
                         float* inv_s, int32_t* sumq, cudaStream_t stream, uint32_t* planes) {
  if (rows <= 0) return;
  if (!p.acc || !p.inv_s || !p.ep.y || !p.ep.add || kp < D || p.ldacc < D || !parts_ok(p, rows))
    check(cudaErrorInvalidValue, "residual_norm_quant (bad arguments)");
  if (planes && kp % 256) check(cudaErrorInvalidValue, "residual_norm_quant (bit planes need kp % 256 == 0)");
  const int vpt = vec_per_thread(D);
  if (!sums_vec_ok(p, D, vpt, kp, weight, q)) {  // the two kernels it stands for
    ternary_epilogue(p.acc, p.ldacc, rows, D, p.inv_s, p.ep, stream, p.parts, p.part_stride);
    norm_quant(p.ep.y, p.ep.ldy, nullptr, weight, rows, D, eps, nullptr, q, kp, inv_s, sumq, stream, planes);
    return;
  }
  if (p.parts > 1) launch_sums<0, true>(vpt, p, weight, rows, D, eps, q, kp, inv_s, sumq, planes, stream);
  else launch_sums<0>(vpt, p, weight, rows, D, eps, q, kp, inv_s, sumq, planes, stream);
}

void glu_norm_quant_sums(const PendingSums& p, int rows, int I, bool relu2, const float* weight, float eps,
                         float* act, int8_t* q, int kp, float* inv_s, int32_t* sumq, cudaStream_t stream,
                         uint32_t* planes) {
  if (rows <= 0) return;
  if (!p.acc || !p.inv_s || !p.ep.y || p.ep.add || kp < I || p.ldacc < 2 * static_cast<int64_t>(I) ||
      !parts_ok(p, rows) ||
      p.ep.ldy < 2 * static_cast<int64_t>(I))
    check(cudaErrorInvalidValue, "glu_norm_quant_sums (bad arguments)");
  if (planes && kp % 256) check(cudaErrorInvalidValue, "glu_norm_quant_sums (bit planes need kp % 256 == 0)");
  const int vpt = vec_per_thread(I);
  if (!sums_vec_ok(p, I, vpt, kp, weight, q) || p.ep.ldy != 2 * static_cast<int64_t>(I) || p.parts != 1) {
    ternary_epilogue(p.acc, p.ldacc, rows, 2 * I, p.inv_s, p.ep, stream, p.parts, p.part_stride);
    glu_norm_quant(p.ep.y, rows, I, relu2, weight, eps, act, q, kp, inv_s, sumq, stream, planes);
    return;
  }
  if (relu2) launch_sums<1>(vpt, p, weight, rows, I, eps, q, kp, inv_s, sumq, planes, stream);
  else launch_sums<2>(vpt, p, weight, rows, I, eps, q, kp, inv_s, sumq, planes, stream);
}

void norm_quant(const float* x, int64_t ldx, const int32_t* row_map, const float* weight, int rows, int D, float eps,
                float* y, int8_t* q, int kp, float* inv_s, int32_t* sumq, cudaStream_t stream, uint32_t* planes) {
  if (rows <= 0) return;
  if (q && kp < D) check(cudaErrorInvalidValue, "norm_quant (kp < D)");
  if (planes && (!q || kp % 256)) check(cudaErrorInvalidValue, "norm_quant (bit planes need q and kp % 256 == 0)");
  const int vpt = vec_per_thread(D);
  if (vpt > 0 && D % 4 == 0 && ldx % 4 == 0 && kp % 4 == 0 && aligned16(x) && aligned16(weight) && aligned16(y) &&
      aligned16(q)) {
    launch_vec<0>(vpt, x, ldx, row_map, weight, rows, D, eps, y, q, kp, inv_s, sumq, planes, stream);
    return;
  }
  launch(norm_quant_kernel, dim3(rows), dim3(kThreads), 0, stream, "norm_quant", x, ldx, row_map, weight, D, eps, y,
         static_cast<__nv_bfloat16*>(nullptr), q, kp, inv_s, sumq);
  if (planes) tcb_planes(q, rows, kp, planes, stream);
}

void glu_norm_quant(const float* gu, int rows, int I, bool relu2, const float* weight, float eps, float* act,
                    int8_t* q, int kp, float* inv_s, int32_t* sumq, cudaStream_t stream, uint32_t* planes) {
  if (rows <= 0) return;
  if (kp < I) check(cudaErrorInvalidValue, "glu_norm_quant (kp < I)");
  if (planes && kp % 256) check(cudaErrorInvalidValue, "glu_norm_quant (bit planes need kp % 256 == 0)");
  const int vpt = vec_per_thread(I);
  if (vpt > 0 && I % 4 == 0 && kp % 4 == 0 && aligned16(gu) && aligned16(weight) && aligned16(q)) {
    if (relu2) launch_vec<1>(vpt, gu, 2 * static_cast<int64_t>(I), nullptr, weight, rows, I, eps, nullptr, q, kp,
                             inv_s, sumq, planes, stream);
    else launch_vec<2>(vpt, gu, 2 * static_cast<int64_t>(I), nullptr, weight, rows, I, eps, nullptr, q, kp, inv_s,
                       sumq, planes, stream);
    return;
  }
  glu(gu, rows, I, relu2, act, stream);
  norm_quant(act, I, nullptr, weight, rows, I, eps, nullptr, q, kp, inv_s, sumq, stream, planes);
}

void norm_to_bf16(const float* x, int64_t ldx, const int32_t* row_map, const float* weight, int rows, int D,
                  float eps, float* y, void* y_bf16, cudaStream_t stream) {
  if (rows <= 0) return;
  launch(norm_quant_kernel, dim3(rows), dim3(kThreads), 0, stream, "norm_to_bf16", x, ldx, row_map, weight, D, eps,
         y, static_cast<__nv_bfloat16*>(y_bf16), static_cast<int8_t*>(nullptr), 0, static_cast<float*>(nullptr),
         static_cast<int32_t*>(nullptr));
}

void embedding(const float* table, const int32_t* tokens, int rows, int D, float* x, cudaStream_t stream) {
  if (rows <= 0) return;
  launch(embedding_kernel, dim3(rows), dim3(kThreads), 0, stream, "embedding", table, tokens, D, 0, INT32_MAX, x);
}

void embedding(const StoredEmbedding& t, const int32_t* tokens, int rows, int D, float* x, cudaStream_t stream) {
  if (rows <= 0) return;
  if (!t.data || D <= 0 ||
      (t.dtype == StoredEmbedding::kQ2_0 && (t.block <= 0 || D % t.block != 0 || t.block_bytes != 2 + t.block / 4)))
    check(cudaErrorInvalidValue, "embedding (stored table: bad Q2_0 blocking or no data)");
  launch(embedding_stored_kernel, dim3(rows), dim3(kThreads), 0, stream, "embedding (stored dtype)", t, tokens, D, x);
}

void embedding_vocab_slice(const float* table, int vbegin, int vend, const int32_t* tokens, int rows, int D, float* x,
                           cudaStream_t stream) {
  if (rows <= 0) return;
  launch(embedding_kernel, dim3(rows), dim3(kThreads), 0, stream, "embedding_vocab_slice", table, tokens, D, vbegin,
         vend, x);
}

void rope_kv_write(float* qkv, int rows, int H, int KVH, int D, const float* cos_t, const float* sin_t,
                   const int32_t* pos, const int32_t* seq, const int32_t* block_tables, int bt_width,
                   int block_size, void* k_pool, void* v_pool, cudaStream_t stream, KvFormat kv) {
  if (rows <= 0) return;
  with_kv_type(kv.elem, [&](auto tag) {
    using KT = decltype(tag);
    launch(rope_kv_kernel<KT>, dim3(rows), dim3(128), 0, stream, "rope_kv_write", qkv, H, KVH, D, cos_t, sin_t, pos,
           seq, block_tables, bt_width, block_size, static_cast<KT*>(k_pool), static_cast<KT*>(v_pool), kv.scale);
  });
}

void head_rms_norm(float* x, int rows, int64_t stride, int heads, int D, const float* weight, float eps,
                   cudaStream_t stream, int heads2, const float* weight2) {
  if (rows <= 0 || heads + heads2 <= 0) return;
  if (heads < 0 || heads2 < 0 || (heads2 > 0 && !weight2)) check(cudaErrorInvalidValue, "head_rms_norm (heads)");
  const int64_t threads = static_cast<int64_t>(rows) * (heads + heads2) * 32;
  launch(head_rms_norm_kernel, dim3(static_cast<unsigned>((threads + kThreads - 1) / kThreads)), dim3(kThreads), 0,
         stream, "head_rms_norm", x, rows, stride, heads, heads2, D, weight, weight2, eps);
}

void glu(const float* gu, int rows, int I, bool relu2, float* act, cudaStream_t stream) {
  if (rows <= 0) return;
  launch(glu_kernel, dim3(grid_for(static_cast<int64_t>(rows) * I)), dim3(kThreads), 0, stream, "glu", gu, rows, I,
         relu2 ? 1 : 0, act);
}

void bias_add(const float* t, const float* bias, int rows, int n, float* y, bool add, cudaStream_t stream) {
  if (rows <= 0) return;
  launch(bias_add_kernel, dim3(grid_for(static_cast<int64_t>(rows) * n)), dim3(kThreads), 0, stream, "bias_add", t,
         bias, rows, n, y, add ? 1 : 0);
}

void to_bf16(const float* x, int64_t n, void* out, cudaStream_t stream) {
  if (n <= 0) return;
  launch(to_bf16_kernel, dim3(grid_for(n)), dim3(kThreads), 0, stream, "to_bf16", x, n,
         static_cast<__nv_bfloat16*>(out));
}

void copy_bytes(const void* src, void* dst, size_t bytes, cudaStream_t stream) {
  if (bytes % 16) check(cudaErrorInvalidValue, "copy_bytes (size not a multiple of 16)");
  int sms = 0, dev = 0;
  check(cudaGetDevice(&dev), "cudaGetDevice");
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev), "cudaDeviceGetAttribute");
  copy_kernel<<<sms * 8, 256, 0, stream>>>(static_cast<const uint4*>(src), static_cast<uint4*>(dst),
                                          static_cast<int64_t>(bytes / 16));
  check_launch("copy_bytes");
}

}  // namespace tritium::cuda
