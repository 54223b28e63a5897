// tritium kernels/cuda: token sampling from device logits (sampling.h): one block of 1024 threads per row.
//
// Reductions visit elements strided by the block (coalesced); the passes that need id order (the tie break of a
// cut, the draw) give each thread a contiguous run of ids and scan the runs' sums across the block. A cut is kept
// as (key, id): an element with order key k and id i passes when k > key or (k == key and i <= id), the order
// (value descending, id ascending) of the CPU sampler's sort. Float operations use the _rn intrinsics so that
// nvcc does not contract them into FMAs the CPU does not use.
#include <cuda_runtime.h>

#include <cfloat>
#include <climits>
#include <cstdint>

#include "kernels/cuda/kernels.h"
#include "kernels/cuda/sampling.h"

namespace tritium::cuda {
namespace {

constexpr int kThreads = 1024;
constexpr int kWarps = kThreads / 32;

/// Monotone map of floats to uint32 (a larger float gets a larger key, -0 and +0 the same one, as they compare
/// equal); finite values map above 0.
__device__ __forceinline__ uint32_t order_key(float s) {
  const uint32_t u = s == 0.0f ? 0u : __float_as_uint(s);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

struct Cut {
  uint32_t key;
  int32_t id;
};
constexpr Cut kNoCut = {0u, -1};  // every finite value passes (its key is above 0)

__device__ __forceinline__ bool passes(const Cut& c, uint32_t k, int i) { return k > c.key || (k == c.key && i <= c.id); }

struct Shared {
  double dred[kWarps];
  float fred[kWarps];
  int ired[kWarps];
  double hist[256];
  uint32_t prefix;
  double remaining;
  int flag;
  int pick;
};

// Block reductions: a butterfly within each warp, the 32 warp results to shared memory, then every warp reduces
// them with the same butterfly (lane j takes warp j's value), so every thread returns the same bits.
template <class T, class Op>
__device__ __forceinline__ T warp_reduce(T v, Op op) {
#pragma unroll
  for (int o = 16; o; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

template <class T, class Op>
__device__ __forceinline__ T block_reduce(T v, Op op, T* red) {
  v = warp_reduce(v, op);
  __syncthreads();  // red may still be read by the previous reduction
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = v;
  __syncthreads();
  return warp_reduce(red[threadIdx.x % 32], op);
}

__device__ __forceinline__ double block_sum(double v, Shared& sh) {
  return block_reduce(v, [](double a, double b) { return a + b; }, sh.dred);
}
__device__ __forceinline__ int block_sum_int(int v, Shared& sh) {
  return block_reduce(v, [](int a, int b) { return a + b; }, sh.ired);
}
__device__ __forceinline__ int block_max_int(int v, Shared& sh) {
  return block_reduce(v, [](int a, int b) { return max(a, b); }, sh.ired);
}
__device__ __forceinline__ int block_min_int(int v, Shared& sh) {
  return block_reduce(v, [](int a, int b) { return min(a, b); }, sh.ired);
}
__device__ __forceinline__ float block_max(float v, Shared& sh) {
  return block_reduce(v, [](float a, float b) { return fmaxf(a, b); }, sh.fred);
}

/// (v, i) better than (bv, bi) in the order (value descending, id ascending).
__device__ __forceinline__ bool better(float v, int i, float bv, int bi) { return v > bv || (v == bv && i < bi); }

/// The best (value, id) of the block from each thread's best: the largest value, then the lowest id holding it
/// (id INT_MAX when no thread had one).
__device__ __forceinline__ void block_argmax(float& v, int& i, Shared& sh) {
  const float m = block_max(v, sh);
  i = block_min_int(v == m ? i : INT_MAX, sh);
  v = m;
}

/// Inclusive scan of x over the threads in order: returns (exclusive, inclusive); the exclusive value of thread t
/// is bit for bit the inclusive value of thread t - 1, so the threads' intervals partition [0, total).
__device__ __forceinline__ void block_scan(double x, double& excl, double& incl, double& total, Shared& sh) {
  const int lane = threadIdx.x % 32, w = threadIdx.x / 32;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const double y = __shfl_up_sync(0xffffffffu, x, o);
    if (lane >= o) x += y;
  }
  const double prev = __shfl_up_sync(0xffffffffu, x, 1);
  __syncthreads();
  if (lane == 31) sh.dred[w] = x;
  __syncthreads();
  double off = 0;
  for (int j = 0; j < w; ++j) off += sh.dred[j];
  total = 0;
  for (int j = 0; j < kWarps; ++j) total += sh.dred[j];
  incl = off + x;
  excl = lane == 0 ? off : off + prev;
}

/// Whether id i passes the allow mask (null: every id does).
__device__ __forceinline__ bool allowed(const uint32_t* allow, int i) {
  return allow == nullptr || ((allow[i >> 5] >> (i & 31)) & 1u);
}

/// The row's values and the softmax of the sampling rule.
struct Row {
  const float* l;
  const uint32_t* allow;
  int V;
  float T, mx;
  double sum;
  /// The scaled logit of i; false when the logit is not finite or i is outside the mask (not a candidate).
  __device__ __forceinline__ bool scaled(int i, float& s) const {
    const float v = l[i];
    if (!(v > -INFINITY) || !allowed(allow, i)) return false;
    s = __fdiv_rn(v, T);
    return true;
  }
  __device__ __forceinline__ float prob(float s) const {
    const float e = static_cast<float>(exp(static_cast<double>(__fsub_rn(s, mx))));
    return static_cast<float>(static_cast<double>(e) / sum);
  }
};

/// The cut of the candidates passing `within` at the shortest prefix of the order (value descending, id
/// ascending) whose weight reaches target: weight 1 per element (MASS false: top-k) or its probability (top-p).
/// kNoCut when the whole set weighs less than target.
template <bool MASS>
__device__ Cut select_cut(const Row& row, const Cut& within, double target, Shared& sh) {
  const int tid = threadIdx.x, V = row.V;
  if (tid == 0) sh.prefix = 0u, sh.remaining = target, sh.flag = 0;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int b = tid; b < 256; b += kThreads) sh.hist[b] = 0.0;
    __syncthreads();
    const uint32_t prefix = sh.prefix;
    const uint32_t hi = shift == 24 ? 0u : (0xffffffffu << (shift + 8));
    for (int i = tid; i < V; i += kThreads) {
      float s;
      if (!row.scaled(i, s)) continue;
      const uint32_t k = order_key(s);
      if (!passes(within, k, i) || (k & hi) != (prefix & hi)) continue;
      atomicAdd(&sh.hist[(k >> shift) & 255u], MASS ? static_cast<double>(row.prob(s)) : 1.0);
    }
    __syncthreads();
    if (tid == 0) {
      double cum = 0, rem = sh.remaining;
      int chosen = -1, lowest = -1;
      for (int b = 255; b >= 0; --b) {
        if (sh.hist[b] == 0.0) continue;
        lowest = b;
        if (cum + sh.hist[b] >= rem) {
          chosen = b;
          break;
        }
        cum += sh.hist[b];
      }
      if (chosen < 0 && shift == 24) {
        sh.flag = 1;  // the whole set weighs less than target: no cut
      } else if (chosen < 0) {
        chosen = lowest;  // rounding left the bucket short: keep all of it
        sh.remaining = INFINITY;
      } else if (rem != INFINITY) {
        sh.remaining = rem - cum;
      }
      if (chosen >= 0) sh.prefix = prefix | (static_cast<uint32_t>(chosen) << shift);
    }
    __syncthreads();
    if (sh.flag) return kNoCut;
  }
  // Ties at the cut's key, in id order: the first id where the weight reaches what is left of target.
  const uint32_t K = sh.prefix;
  const double rem = sh.remaining;
  const int C = (V + kThreads - 1) / kThreads, b0 = min(V, tid * C), b1 = min(V, b0 + C);
  double loc = 0;
  for (int i = b0; i < b1; ++i) {
    float s;
    if (row.scaled(i, s) && order_key(s) == K && passes(within, K, i)) loc += MASS ? static_cast<double>(row.prob(s)) : 1.0;
  }
  double excl, incl, total;
  block_scan(loc, excl, incl, total, sh);
  if (tid == 0) sh.pick = INT_MAX;
  __syncthreads();
  if (rem != INFINITY && excl < rem && incl >= rem) {
    int last = -1, found = -1;
    double acc = 0;
    for (int i = b0; i < b1 && found < 0; ++i) {
      float s;
      if (!(row.scaled(i, s) && order_key(s) == K && passes(within, K, i))) continue;
      last = i;
      acc += MASS ? static_cast<double>(row.prob(s)) : 1.0;
      if (excl + acc >= rem) found = i;
    }
    sh.pick = found >= 0 ? found : last;
  }
  __syncthreads();
  const Cut c = {K, sh.pick};
  __syncthreads();
  return c;
}

__global__ void __launch_bounds__(kThreads) sample_kernel(float* __restrict__ logits, int V,
                                                         const SampleRowParams* __restrict__ params,
                                                         const SamplePenalty* __restrict__ pen,
                                                         const int32_t* __restrict__ ban,
                                                         const uint32_t* __restrict__ allow_all,
                                                         float* __restrict__ saved_pen, float* __restrict__ saved_ban,
                                                         SampleResult* __restrict__ out) {
  __shared__ Shared sh;
  const int tid = threadIdx.x;
  const SampleRowParams P = params[blockIdx.x];
  if (!P.active) return;
  float* l = logits + static_cast<int64_t>(blockIdx.x) * V;
  const uint32_t* allow = P.allow_begin < 0 ? nullptr : allow_all + P.allow_begin;

  // Bans and penalties, the touched logits saved first (an id may be in both lists).
  for (int j = tid; j < P.ban_count; j += kThreads) saved_ban[P.ban_begin + j] = l[ban[P.ban_begin + j]];
  for (int j = tid; j < P.pen_count; j += kThreads) saved_pen[P.pen_begin + j] = l[pen[P.pen_begin + j].id];
  __syncthreads();
  for (int j = tid; j < P.ban_count; j += kThreads) l[ban[P.ban_begin + j]] = -INFINITY;
  __syncthreads();
  const bool pres = P.presence != 0.0f || P.frequency != 0.0f;
  for (int j = tid; j < P.pen_count; j += kThreads) {
    const SamplePenalty e = pen[P.pen_begin + j];
    float v = l[e.id];
    if (P.rep != 1.0f && e.seen) v = v > 0 ? __fdiv_rn(v, P.rep) : __fmul_rn(v, P.rep);
    if (pres && e.count > 0) v = __fsub_rn(v, __fadd_rn(P.presence, __fmul_rn(P.frequency, static_cast<float>(e.count))));
    l[e.id] = v;
  }
  __syncthreads();

  int pick = 0;
  if (P.temperature <= 0.0f || P.top_k == 1) {
    float bv = -INFINITY;
    int bi = INT_MAX;
    for (int i = tid; i < V; i += kThreads) {
      const float v = allowed(allow, i) ? l[i] : -INFINITY;
      if (better(v, i, bv, bi)) bv = v, bi = i;
    }
    block_argmax(bv, bi, sh);
    pick = bi == INT_MAX ? 0 : bi;
  } else {
    Row row{l, allow, V, P.temperature, -INFINITY, 0.0};
    float mx = -INFINITY;
    int cnt = 0;
    for (int i = tid; i < V; i += kThreads) {
      float s;
      if (row.scaled(i, s)) mx = fmaxf(mx, s), ++cnt;
    }
    row.mx = block_max(mx, sh);
    cnt = block_sum_int(cnt, sh);
    if (cnt > 0) {
      Cut c1 = kNoCut, c2 = kNoCut;
      if (P.top_k > 0 && P.top_k < cnt) c1 = select_cut<false>(row, c1, static_cast<double>(P.top_k), sh);
      double sum = 0;
      for (int i = tid; i < V; i += kThreads) {
        float s;
        if (row.scaled(i, s) && passes(c1, order_key(s), i))
          sum += static_cast<double>(static_cast<float>(exp(static_cast<double>(__fsub_rn(s, row.mx)))));
      }
      row.sum = block_sum(sum, sh);
      if (P.top_p < 1.0f) c2 = select_cut<true>(row, c1, static_cast<double>(P.top_p), sh);
      // min-p against the largest probability, float(exp(0) / sum).
      const float thr = P.min_p > 0.0f ? __fmul_rn(P.min_p, static_cast<float>(1.0 / row.sum)) : -1.0f;
      // The draw: kept ids in id order, thread tid holding ids [b0, b1).
      const int C = (V + kThreads - 1) / kThreads, b0 = min(V, tid * C), b1 = min(V, b0 + C);
      auto kept = [&](int i, float& p) {
        float s;
        if (!row.scaled(i, s)) return false;
        const uint32_t k = order_key(s);
        if (!passes(c1, k, i) || !passes(c2, k, i)) return false;
        p = row.prob(s);
        return p >= thr;
      };
      double loc = 0;
      int last = -1;
      for (int i = b0; i < b1; ++i) {
        float p;
        if (kept(i, p)) loc += static_cast<double>(p), last = i;
      }
      double excl, incl, total;
      block_scan(loc, excl, incl, total, sh);
      const double r = P.uniform * total;
      if (tid == 0) sh.pick = -1;
      __syncthreads();
      if (excl <= r && r < incl) {
        double acc = 0;
        int found = -1;
        for (int i = b0; i < b1 && found < 0; ++i) {
          float p;
          if (!kept(i, p)) continue;
          acc += static_cast<double>(p);
          if (r < excl + acc) found = i;
        }
        sh.pick = found >= 0 ? found : last;
      }
      const int last_all = block_max_int(last, sh);  // its barriers also publish sh.pick
      pick = sh.pick >= 0 ? sh.pick : last_all;
    }
  }
  __syncthreads();

  // Restore the raw logits (penalties first: a banned id's raw value is in saved_ban).
  for (int j = tid; j < P.pen_count; j += kThreads) l[pen[P.pen_begin + j].id] = saved_pen[P.pen_begin + j];
  __syncthreads();
  for (int j = tid; j < P.ban_count; j += kThreads) l[ban[P.ban_begin + j]] = saved_ban[P.ban_begin + j];
  __syncthreads();

  SampleResult* o = out + blockIdx.x;
  if (tid == 0) o->id = pick;
  if (P.logprobs < 0) return;
  // log-softmax of the raw row (engine token_logprob: max in float, sum of exp in double, lse = mx + log(sum)).
  float mx = -INFINITY;
  for (int i = tid; i < V; i += kThreads) mx = fmaxf(mx, l[i]);
  mx = block_max(mx, sh);
  double se = 0;
  for (int i = tid; i < V; i += kThreads) se += exp(static_cast<double>(__fsub_rn(l[i], mx)));
  se = block_sum(se, sh);
  const float lse = __fadd_rn(mx, static_cast<float>(log(se)));
  const float chosen = l[pick];
  int higher = 0;
  for (int i = tid; i < V; i += kThreads) higher += l[i] > chosen;
  higher = block_sum_int(higher, sh);
  if (tid == 0) {
    o->logprob = __fsub_rn(chosen, lse);
    o->rank = 1 + higher;
  }
  float pv = INFINITY;
  int pi = -1;
  const int k = min(P.logprobs, kSampleMaxTop);
  for (int j = 0; j < k; ++j) {
    float bv = -INFINITY;
    int bi = INT_MAX;
    for (int i = tid; i < V; i += kThreads) {
      const float v = l[i];
      const bool after = v < pv || (v == pv && i > pi);  // after the previous pick in the order
      if (after && better(v, i, bv, bi)) bv = v, bi = i;
    }
    block_argmax(bv, bi, sh);
    if (bi == INT_MAX) break;
    if (tid == 0) o->top_id[j] = bi, o->top_lp[j] = __fsub_rn(bv, lse);
    pv = bv, pi = bi;
  }
}

}  // namespace

void sample_rows(float* logits, int V, int rows, const SampleRowParams* params, const SamplePenalty* pen,
                 const int32_t* ban, const uint32_t* allow, float* saved_pen, float* saved_ban, SampleResult* out,
                 cudaStream_t stream) {
  if (rows <= 0) return;
  sample_kernel<<<rows, kThreads, 0, stream>>>(logits, V, params, pen, ban, allow, saved_pen, saved_ban, out);
  check_launch("sample_rows");
}

}  // namespace tritium::cuda
