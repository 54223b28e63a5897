// CUDA kernels of the int8 linear layers: per-request activation statistics and quantization, the dp4a GEMV,
// the dequantization epilogue with the LLM.int8() outlier part, weight-only int8. See int8.h.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cub/block/block_scan.cuh>
#include <cstdint>

#include "kernels/cuda/int8.h"
#include "kernels/cuda/kernels.h"

namespace tritium::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;

__device__ __forceinline__ int request_of(const int32_t* seq, const int32_t* row_map, int r) {
  return seq ? seq[row_map ? row_map[r] : r] : 0;
}

/// Block-wide reduction (every thread gets the result). op: 0 max, 1 min, 2 sum (int via float is not used).
template <class T, class Op>
__device__ T block_reduce(T v, Op op, T* sh) {
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();  // sh may still be read by a previous reduction
  if (lane == 0) sh[warp] = v;
  __syncthreads();
  v = sh[0];
  for (int w = 1; w < kWarps; ++w) v = op(v, sh[w]);
  return v;
}

struct MaxOp {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
struct MinOp {
  __device__ float operator()(float a, float b) const { return fminf(a, b); }
};
struct SumOp {
  __device__ int operator()(int a, int b) const { return a + b; }
};

/// Symmetric code: clamp(round_half_even(double(v) * double(inv)), -127, 127) (quantize_s8).
__device__ __forceinline__ int quant_s8(float v, float inv) {
  double r = rint(__dmul_rn(static_cast<double>(v), static_cast<double>(inv)));
  r = r < -127.0 ? -127.0 : (r > 127.0 ? 127.0 : r);
  return static_cast<int>(r);
}

/// Request bounds: gb[m] / ge[m] = first / one past the last row with m's request id (ids non-decreasing).
__global__ void bounds_kernel(const int32_t* __restrict__ seq, const int32_t* __restrict__ row_map, int rows,
                              int32_t* __restrict__ gb, int32_t* __restrict__ ge) {
  const int m = blockIdx.x * blockDim.x + threadIdx.x;
  if (m >= rows) return;
  const int g = request_of(seq, row_map, m);
  int lo = 0, hi = m;  // first j in [0, m] with id(j) >= g
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    if (request_of(seq, row_map, mid) < g) lo = mid + 1;
    else hi = mid;
  }
  gb[m] = lo;
  lo = m + 1;
  hi = rows;  // first j in (m, rows) with id(j) > g
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    if (request_of(seq, row_map, mid) <= g) lo = mid + 1;
    else hi = mid;
  }
  ge[m] = lo;
}

/// Per-row absmax / min / max, and (llm) the |x| >= alpha bit mask of the row.
__global__ void __launch_bounds__(kThreads) row_stats_kernel(const float* __restrict__ x, int64_t ldx, int k, int kw,
                                                             int llm, float alpha, float* __restrict__ stat,
                                                             uint32_t* __restrict__ mask) {
  __shared__ float sh[kWarps];
  const int m = blockIdx.x;
  const float* xr = x + m * ldx;
  float amax = 0.0f, lo = INFINITY, hi = -INFINITY;
  for (int c = threadIdx.x; c < k; c += kThreads) {
    const float v = xr[c];
    amax = fmaxf(amax, fabsf(v));
    lo = fminf(lo, v);
    hi = fmaxf(hi, v);
  }
  amax = block_reduce(amax, MaxOp{}, sh);
  lo = block_reduce(lo, MinOp{}, sh);
  hi = block_reduce(hi, MaxOp{}, sh);
  if (threadIdx.x == 0) {
    stat[3 * m] = amax;
    stat[3 * m + 1] = lo;
    stat[3 * m + 2] = hi;
  }
  if (llm) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    for (int w = warp; w < kw; w += kWarps) {
      const int c = w * 32 + lane;
      const bool o = c < k && fabsf(xr[c]) >= alpha;
      const uint32_t bits = __ballot_sync(0xffffffffu, o);
      if (lane == 0) mask[static_cast<int64_t>(m) * kw + w] = bits;
    }
  }
}

/// At the first row of each request: the request's absmax / min / max and (llm) the OR of its rows' masks,
/// the batch union of outlier columns and whether the request has any.
__global__ void __launch_bounds__(kThreads) request_kernel(const int32_t* __restrict__ gb, const int32_t* __restrict__ ge,
                                                           int kw, int llm, float* __restrict__ stat,
                                                           uint32_t* __restrict__ mask, uint32_t* __restrict__ umask,
                                                           int32_t* __restrict__ has_out) {
  __shared__ float sh[kWarps];
  const int m = blockIdx.x;
  if (gb[m] != m) return;  // uniform over the block
  const int e = ge[m];
  float amax = 0.0f, lo = INFINITY, hi = -INFINITY;
  for (int r = m + threadIdx.x; r < e; r += kThreads) {
    amax = fmaxf(amax, stat[3 * r]);
    lo = fminf(lo, stat[3 * r + 1]);
    hi = fmaxf(hi, stat[3 * r + 2]);
  }
  amax = block_reduce(amax, MaxOp{}, sh);
  lo = block_reduce(lo, MinOp{}, sh);
  hi = block_reduce(hi, MaxOp{}, sh);
  if (threadIdx.x == 0) {
    stat[3 * m] = amax;
    stat[3 * m + 1] = lo;
    stat[3 * m + 2] = hi;
  }
  if (llm) {
    int any = 0;
    for (int w = threadIdx.x; w < kw; w += kThreads) {
      uint32_t v = 0;
#pragma unroll 8
      for (int r = m; r < e; ++r) v |= mask[static_cast<int64_t>(r) * kw + w];
      mask[static_cast<int64_t>(m) * kw + w] = v;
      if (v) {
        atomicOr(umask + w, v);
        any = 1;
      }
    }
    any = __syncthreads_or(any);
    if (threadIdx.x == 0) has_out[m] = any;
  }
}

/// The union of outlier columns as an ascending list: ucols[0..count), ucols[k] = count. One block.
constexpr int kUnionThreads = 1024;
__global__ void __launch_bounds__(kUnionThreads) union_list_kernel(const uint32_t* __restrict__ umask, int kw, int k,
                                                                    int32_t* __restrict__ ucols) {
  using Scan = cub::BlockScan<int, kUnionThreads>;
  __shared__ typename Scan::TempStorage tmp;
  const int per = (kw + kUnionThreads - 1) / kUnionThreads;
  const int w0 = threadIdx.x * per, w1 = min(kw, w0 + per);
  int cnt = 0;
  for (int w = w0; w < w1; ++w) cnt += __popc(umask[w]);
  int off = 0, total = 0;
  Scan(tmp).ExclusiveSum(cnt, off, total);
  for (int w = w0; w < w1; ++w) {
    uint32_t bits = umask[w];
    while (bits) {
      const int b = __ffs(bits) - 1;
      ucols[off++] = w * 32 + b;
      bits &= bits - 1;
    }
  }
  if (threadIdx.x == 0) ucols[k] = total;
}

/// Codes of one row with the statistics of its mode (see Int8Projection::forward step 1).
__global__ void __launch_bounds__(kThreads) quant_kernel(const float* __restrict__ x, int64_t ldx, int k, int kp, int kw,
                                                         int mode, const int32_t* __restrict__ gb,
                                                         const float* __restrict__ stat,
                                                         const uint32_t* __restrict__ mask, int8_t* __restrict__ xq,
                                                         float* __restrict__ sx, int32_t* __restrict__ zx,
                                                         int32_t* __restrict__ sumq) {
  __shared__ float sh[kWarps];
  __shared__ int shi[kWarps];
  const int m = blockIdx.x;
  const float* xr = x + m * ldx;
  int8_t* q = xq + static_cast<int64_t>(m) * kp;
  const int g = mode == static_cast<int>(Int8ActMode::kAbsmaxPerRow) ? m : gb[m];
  if (mode == static_cast<int>(Int8ActMode::kZeropointPerRequest)) {
    float lo = stat[3 * g + 1], hi = stat[3 * g + 2];
    lo = 0.0f < lo ? 0.0f : lo;  // std::min(lo, 0.0f)
    hi = hi < 0.0f ? 0.0f : hi;  // std::max(hi, 0.0f)
    float nd = 0.0f, scale = 0.0f;
    int zero = 0;
    if (hi > lo) {
      nd = __fdiv_rn(254.0f, __fsub_rn(hi, lo));
      scale = __fdiv_rn(__fsub_rn(hi, lo), 254.0f);
      zero = -127 - static_cast<int>(rint(__dmul_rn(static_cast<double>(lo), static_cast<double>(nd))));
    }
    int s = 0;
    for (int c = threadIdx.x; c < kp; c += kThreads) {
      int v = 0;
      if (c < k) {
        double r = rint(__dmul_rn(static_cast<double>(xr[c]), static_cast<double>(nd))) + zero;
        r = r < -127.0 ? -127.0 : (r > 127.0 ? 127.0 : r);
        v = static_cast<int>(r);
      }
      q[c] = static_cast<int8_t>(v);
      s += v;
    }
    s = block_reduce(s, SumOp{}, shi);
    if (threadIdx.x == 0) {
      sumq[m] = s;
      sx[m] = scale;
      zx[m] = zero;
    }
    return;
  }
  const bool llm = mode == static_cast<int>(Int8ActMode::kLlmInt8);
  const uint32_t* mg = llm ? mask + static_cast<int64_t>(g) * kw : nullptr;
  float amax;
  if (llm) {
    amax = 0.0f;
    for (int c = threadIdx.x; c < k; c += kThreads)
      if (!((mg[c >> 5] >> (c & 31)) & 1u)) amax = fmaxf(amax, fabsf(xr[c]));
    amax = block_reduce(amax, MaxOp{}, sh);
  } else {
    amax = stat[3 * g];
  }
  const float inv = amax > 0.0f ? __fdiv_rn(127.0f, amax) : 0.0f;
  for (int c = threadIdx.x; c < kp; c += kThreads) {
    int v = 0;
    if (c < k && !(llm && ((mg[c >> 5] >> (c & 31)) & 1u))) v = quant_s8(xr[c], inv);
    q[c] = static_cast<int8_t>(v);
  }
  if (threadIdx.x == 0) {
    sx[m] = __fdiv_rn(amax, 127.0f);
    zx[m] = 0;
    sumq[m] = 0;
  }
}

/// dp4a GEMV: one warp per weight row, 16 bytes per lane per step; MT activation rows.
template <int MT>
__global__ void __launch_bounds__(kThreads) gemv_dp4a_kernel(const int8_t* __restrict__ w, int np, int kp,
                                                             const int8_t* __restrict__ xq,
                                                             int32_t* __restrict__ acc, int64_t ldc) {
  const int n = blockIdx.x * kWarps + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (n >= np) return;
  const int chunks = kp / 16;
  const int4* wr = reinterpret_cast<const int4*>(w + static_cast<int64_t>(n) * kp);
  int s[MT];
#pragma unroll
  for (int m = 0; m < MT; ++m) s[m] = 0;
#pragma unroll 2
  for (int i = lane; i < chunks; i += 32) {
    const int4 wv = __ldg(wr + i);
#pragma unroll
    for (int m = 0; m < MT; ++m) {
      const int4 xv = __ldg(reinterpret_cast<const int4*>(xq + static_cast<int64_t>(m) * kp) + i);
      s[m] = __dp4a(wv.x, xv.x, s[m]);
      s[m] = __dp4a(wv.y, xv.y, s[m]);
      s[m] = __dp4a(wv.z, xv.z, s[m]);
      s[m] = __dp4a(wv.w, xv.w, s[m]);
    }
  }
#pragma unroll
  for (int m = 0; m < MT; ++m)
    for (int o = 16; o > 0; o >>= 1) s[m] += __shfl_xor_sync(0xffffffffu, s[m], o);
#pragma unroll
  for (int m = 0; m < MT; ++m)
    if (lane == m) acc[m * ldc + n] = s[m];
}

__global__ void __launch_bounds__(kThreads) epilogue_kernel(Int8Epilogue e, const int32_t* __restrict__ gb,
                                                            const float* __restrict__ sx,
                                                            const int32_t* __restrict__ zx,
                                                            const int32_t* __restrict__ sumq,
                                                            const uint32_t* __restrict__ mask,
                                                            const int32_t* __restrict__ has_out,
                                                            const int32_t* __restrict__ ucols, int rows) {
  const int n = blockIdx.x * kThreads + threadIdx.x;
  if (n >= e.n) return;
  const int kw = (e.k + 31) / 32;
  const float swn = e.per_tensor ? e.sw[0] : e.sw[n];
  for (int m = blockIdx.y; m < rows; m += gridDim.y) {
    const float s = __fmul_rn(sx[m], swn);
    const int32_t a = e.acc[m * e.ldacc + n];
    float y;
    if (e.zeropoint) {
      const int64_t zxm = zx[m], zw = e.zw;
      const int64_t v = static_cast<int64_t>(a) - zw * sumq[m] - zxm * e.w_row_sum[n] + static_cast<int64_t>(e.k) * zxm * zw;
      y = __fmul_rn(__ll2float_rn(v), s);
    } else {
      y = __fmul_rn(__int2float_rn(a), s);
    }
    if (e.llm) {
      const int g = gb[m];
      if (has_out[g]) {
        const uint32_t* mg = mask + static_cast<int64_t>(g) * kw;
        const int nu = ucols[e.k];
        const float* xr = e.x + m * e.ldx;
        float part = 0.0f;
        for (int j = 0; j < nu; ++j) {
          const int c = ucols[j];
          if (!((mg[c >> 5] >> (c & 31)) & 1u)) continue;  // not an outlier of this request: adds exactly 0
          const float wv = e.w16t ? __half2float(__ushort_as_half(e.w16t[static_cast<int64_t>(c) * e.n + n]))
                                  : __fmul_rn(static_cast<float>(e.wq[static_cast<int64_t>(n) * e.kp + c]), swn);
          part = __fadd_rn(part, __fmul_rn(xr[c], wv));
        }
        y = __fadd_rn(y, part);
      }
    }
    if (e.bias) y = __fadd_rn(y, e.bias[n]);
    float* o = e.out + m * e.ldout + n;
    *o = e.add ? __fadd_rn(*o, y) : y;
  }
}

/// Weight-only: one warp per output feature, up to 8 rows at a time, fp32 sums in a fixed lane order.
__global__ void __launch_bounds__(kThreads) weight_only_kernel(const float* __restrict__ x, int64_t ldx, int rows,
                                                               const int8_t* __restrict__ w, int n, int k, int kp,
                                                               const float* __restrict__ sw,
                                                               const float* __restrict__ bias, float* __restrict__ out,
                                                               int64_t ldout, int add) {
  const int r = blockIdx.x * kWarps + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (r >= n) return;
  const char4* wr = reinterpret_cast<const char4*>(w + static_cast<int64_t>(r) * kp);
  const int words = kp / 4;
  for (int m0 = 0; m0 < rows; m0 += 8) {
    const int mt = min(8, rows - m0);
    float s[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) s[j] = 0.0f;
    for (int i = lane; i < words; i += 32) {
      const char4 wv = wr[i];
      const float wf[4] = {static_cast<float>(wv.x), static_cast<float>(wv.y), static_cast<float>(wv.z),
                           static_cast<float>(wv.w)};
      const int c0 = 4 * i;
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        if (j >= mt) break;
        const float* xr = x + (m0 + j) * ldx;
#pragma unroll
        for (int b = 0; b < 4; ++b)
          if (c0 + b < k) s[j] = __fadd_rn(s[j], __fmul_rn(xr[c0 + b], wf[b]));
      }
    }
#pragma unroll
    for (int j = 0; j < 8; ++j)
      for (int o = 16; o > 0; o >>= 1) s[j] = __fadd_rn(s[j], __shfl_xor_sync(0xffffffffu, s[j], o));
    if (lane < mt) {
      float sel = s[0];
#pragma unroll
      for (int j = 1; j < 8; ++j)
        if (lane == j) sel = s[j];
      float y = __fmul_rn(sw[r], sel);
      if (bias) y = __fadd_rn(y, bias[r]);
      float* o = out + (m0 + lane) * ldout + r;
      *o = add ? __fadd_rn(*o, y) : y;
    }
  }
}

int blocks_for(int64_t items, int per_block) { return static_cast<int>((items + per_block - 1) / per_block); }

}  // namespace

void int8_quantize_activations(const float* x, int64_t ldx, int rows, int k, int kp, Int8ActMode mode, float alpha,
                               const int32_t* seq, const int32_t* row_map, const Int8ActBuffers& b,
                               cudaStream_t stream) {
  if (rows <= 0) return;
  const int kw = (k + 31) / 32;
  const bool llm = mode == Int8ActMode::kLlmInt8;
  const bool per_request = mode != Int8ActMode::kAbsmaxPerRow;
  if (per_request) {
    bounds_kernel<<<blocks_for(rows, kThreads), kThreads, 0, stream>>>(seq, row_map, rows, b.gb, b.ge);
    check_launch("int8 request bounds");
  }
  row_stats_kernel<<<rows, kThreads, 0, stream>>>(x, ldx, k, kw, llm ? 1 : 0, alpha, b.stat, b.mask);
  check_launch("int8 row statistics");
  if (llm) check(cudaMemsetAsync(b.umask, 0, static_cast<size_t>(kw) * sizeof(uint32_t), stream), "cudaMemsetAsync");
  if (per_request) {
    request_kernel<<<rows, kThreads, 0, stream>>>(b.gb, b.ge, kw, llm ? 1 : 0, b.stat, b.mask, b.umask, b.has_out);
    check_launch("int8 request statistics");
  }
  if (llm) {
    union_list_kernel<<<1, kUnionThreads, 0, stream>>>(b.umask, kw, k, b.ucols);
    check_launch("int8 outlier union");
  }
  quant_kernel<<<rows, kThreads, 0, stream>>>(x, ldx, k, kp, kw, static_cast<int>(mode), b.gb, b.stat, b.mask, b.xq,
                                              b.sx, b.zx, b.sumq);
  check_launch("int8 activation quantization");
}

void int8_gemv_dp4a(const int8_t* w, int np, int kp, const int8_t* xq, int M, int32_t* acc, int64_t ldc,
                    cudaStream_t stream) {
  if (M <= 0) return;
  const int grid = blocks_for(np, kWarps);
  switch (M) {
    case 1: gemv_dp4a_kernel<1><<<grid, kThreads, 0, stream>>>(w, np, kp, xq, acc, ldc); break;
    case 2: gemv_dp4a_kernel<2><<<grid, kThreads, 0, stream>>>(w, np, kp, xq, acc, ldc); break;
    case 3: gemv_dp4a_kernel<3><<<grid, kThreads, 0, stream>>>(w, np, kp, xq, acc, ldc); break;
    case 4: gemv_dp4a_kernel<4><<<grid, kThreads, 0, stream>>>(w, np, kp, xq, acc, ldc); break;
    case 5: gemv_dp4a_kernel<5><<<grid, kThreads, 0, stream>>>(w, np, kp, xq, acc, ldc); break;
    case 6: gemv_dp4a_kernel<6><<<grid, kThreads, 0, stream>>>(w, np, kp, xq, acc, ldc); break;
    case 7: gemv_dp4a_kernel<7><<<grid, kThreads, 0, stream>>>(w, np, kp, xq, acc, ldc); break;
    case 8: gemv_dp4a_kernel<8><<<grid, kThreads, 0, stream>>>(w, np, kp, xq, acc, ldc); break;
    default:  // larger batches: blocks of 8 rows
      for (int m0 = 0; m0 < M; m0 += 8)
        int8_gemv_dp4a(w, np, kp, xq + static_cast<int64_t>(m0) * kp, M - m0 < 8 ? M - m0 : 8, acc + m0 * ldc, ldc,
                       stream);
      return;
  }
  check_launch("int8 dp4a GEMV");
}

void int8_dequant_epilogue(const Int8Epilogue& e, const Int8ActBuffers& b, int rows, cudaStream_t stream) {
  if (rows <= 0) return;
  const dim3 grid(blocks_for(e.n, kThreads), rows < 65535 ? rows : 65535);
  epilogue_kernel<<<grid, kThreads, 0, stream>>>(e, b.gb, b.sx, b.zx, b.sumq, b.mask, b.has_out, b.ucols, rows);
  check_launch("int8 dequantization epilogue");
}

void int8_weight_only(const float* x, int64_t ldx, int rows, const int8_t* w, int n, int k, int kp, const float* sw,
                      const float* bias, float* out, int64_t ldout, bool add, cudaStream_t stream) {
  if (rows <= 0) return;
  weight_only_kernel<<<blocks_for(n, kWarps), kThreads, 0, stream>>>(x, ldx, rows, w, n, k, kp, sw, bias, out, ldout,
                                                                     add ? 1 : 0);
  check_launch("int8 weight-only GEMM");
}

}  // namespace tritium::cuda
