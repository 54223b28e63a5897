// int8 GEMV/GEMM kernels vs an fp32 baseline (AVX-512 FMA, same 4-row tiling) on transformer shapes.
// Args: N (out features), K (in features), M (tokens; 1 = GEMV). Single thread unless
// TRITIUM_BENCH_THREADS is set. Counters: GB/s of weight bytes streamed, GOPS (2*M*N*K / time).
// BM_Int8/avx{2,512}_head: the 2B4T output head (128256 x 2560 int8, 328 MB: from DRAM) at 1 and 4 tokens,
// BM_Q6Head and BM_Q4Head the same head in the grouped formats (q6: 266.8 MB, q4: 184.7 MB, codes and fp16
// scales; the kernel path the CPU runs), and BM_ReadBW the read bandwidth of a 1 GiB buffer on the same threads,
// so each head GEMV's share of it comes from one run (`--benchmark_filter='head|Head|ReadBW'`).
// GCC 12: false -Wmaybe-uninitialized / -Wuninitialized inside avx512fintrin.h reduce helpers.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <benchmark/benchmark.h>
#include <immintrin.h>

#include <cstdlib>
#include <random>
#include <vector>

#include "core/parallel.h"
#include "kernels/cpu/int8_gemm.h"
#include "kernels/cpu/q4_gemm.h"
#include "kernels/cpu/q6_gemm.h"
#include "quant/int8_projection.h"

using namespace tritium;

namespace {

void setup_threads() {
  const char* t = std::getenv("TRITIUM_BENCH_THREADS");
  set_num_threads(t ? std::atoi(t) : 1);
}

__attribute__((target("avx512f,fma"))) void gemm_f32_baseline(const float* x, const float* w, int64_t M,
                                                              int64_t N, int64_t K, float* y, int64_t n0,
                                                              int64_t n1) {
  const int64_t K16 = K & ~int64_t{15};
  int64_t n = n0;
  for (; n + 4 <= n1; n += 4) {
    const float *w0 = w + n * K, *w1 = w0 + K, *w2 = w1 + K, *w3 = w2 + K;
    for (int64_t m = 0; m < M; ++m) {
      const float* xr = x + m * K;
      __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
      for (int64_t k = 0; k < K16; k += 16) {
        const __m512 xv = _mm512_loadu_ps(xr + k);
        a0 = _mm512_fmadd_ps(xv, _mm512_loadu_ps(w0 + k), a0);
        a1 = _mm512_fmadd_ps(xv, _mm512_loadu_ps(w1 + k), a1);
        a2 = _mm512_fmadd_ps(xv, _mm512_loadu_ps(w2 + k), a2);
        a3 = _mm512_fmadd_ps(xv, _mm512_loadu_ps(w3 + k), a3);
      }
      float* o = y + m * N + n;
      o[0] = _mm512_reduce_add_ps(a0);
      o[1] = _mm512_reduce_add_ps(a1);
      o[2] = _mm512_reduce_add_ps(a2);
      o[3] = _mm512_reduce_add_ps(a3);
      for (int64_t k = K16; k < K; ++k) {
        o[0] += xr[k] * w0[k];
        o[1] += xr[k] * w1[k];
        o[2] += xr[k] * w2[k];
        o[3] += xr[k] * w3[k];
      }
    }
  }
  for (; n < n1; ++n)
    for (int64_t m = 0; m < M; ++m) {
      float s = 0;
      for (int64_t k = 0; k < K; ++k) s += x[m * K + k] * w[n * K + k];
      y[m * N + n] = s;
    }
}

void counters(benchmark::State& st, int64_t M, int64_t N, int64_t K, double wbytes) {
  st.counters["GB/s"] = benchmark::Counter(wbytes, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
  st.counters["GOPS"] = benchmark::Counter(2.0 * M * N * K, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
}

void BM_Int8(benchmark::State& st, Int8Kernel kern) {
  if (!int8_kernel_supported(kern)) {
    st.SkipWithError("kernel not supported");
    return;
  }
  setup_threads();
  const int64_t N = st.range(0), K = st.range(1), M = st.range(2);
  std::mt19937 rng(1);
  std::uniform_int_distribution<int> d(-127, 127);
  std::vector<int8_t> x(static_cast<size_t>(M * K)), w(static_cast<size_t>(N * K));
  for (auto& v : x) v = static_cast<int8_t>(d(rng));
  for (auto& v : w) v = static_cast<int8_t>(d(rng));
  std::vector<int32_t> rs(static_cast<size_t>(N)), acc(static_cast<size_t>(M * N));
  int8_row_sums(w.data(), N, K, rs.data());
  for (auto _ : st) {
    gemm_s8s8_s32(x.data(), w.data(), rs.data(), M, N, K, acc.data(), kern);
    benchmark::DoNotOptimize(acc.data());
  }
  counters(st, M, N, K, static_cast<double>(N * K));
}

void BM_Fp32(benchmark::State& st) {
  setup_threads();
  const int64_t N = st.range(0), K = st.range(1), M = st.range(2);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> x(static_cast<size_t>(M * K)), w(static_cast<size_t>(N * K)), y(static_cast<size_t>(M * N));
  for (auto& v : x) v = u(rng);
  for (auto& v : w) v = u(rng);
  for (auto _ : st) {
    parallel_for(N, 32, [&](int64_t n0, int64_t n1) { gemm_f32_baseline(x.data(), w.data(), M, N, K, y.data(), n0, n1); });
    benchmark::DoNotOptimize(y.data());
  }
  counters(st, M, N, K, 4.0 * static_cast<double>(N * K));
}

// Whole Int8Projection forward (activation quantization + GEMM + dequantization [+ outlier path]).
void BM_Linear(benchmark::State& st, Int8Method method) {
  setup_threads();
  const int64_t N = st.range(0), K = st.range(1), M = st.range(2);
  std::mt19937 rng(1);
  std::normal_distribution<float> g(0, 1);
  std::vector<float> x(static_cast<size_t>(M * K)), w(static_cast<size_t>(N * K)), y(static_cast<size_t>(M * N));
  for (auto& v : x) v = g(rng);
  for (auto& v : w) v = 0.02f * g(rng);
  for (int64_t m = 0; m < M; ++m) x[m * K + 7] *= 30.0f;  // one outlier feature, as in real models
  Int8Projection lin(method, w.data(), N, K);
  for (auto _ : st) {
    lin.forward(x.data(), M, y.data());
    benchmark::DoNotOptimize(y.data());
  }
  counters(st, M, N, K, static_cast<double>(N * K));
}

// The grouped head formats on random codes and scales (fp16 scales of about 0.002; any code byte is valid), int8
// activations as the heads get them; the bytes counted are the codes and the scales.
template <typename Rows>
Rows random_grouped_rows(int64_t N, int64_t K, int64_t code_bytes) {
  Rows q;
  q.n = N;
  q.k = K;
  q.codes.resize(static_cast<size_t>(code_bytes));
  q.scales.resize(static_cast<size_t>(N * K / 32));
  std::mt19937 rng(1);
  for (auto& v : q.codes) v = static_cast<uint8_t>(rng());
  for (auto& v : q.scales) v = static_cast<uint16_t>(0x1800 + rng() % 256);
  return q;
}

template <typename Rows, void (*Gemm)(const Rows&, const int8_t*, const float*, int64_t, float*)>
void BM_GroupedHead(benchmark::State& st, int64_t bytes_per_4_weights) {
  setup_threads();
  const int64_t N = st.range(0), K = st.range(1), M = st.range(2);
  const Rows q = random_grouped_rows<Rows>(N, K, N * K / 4 * bytes_per_4_weights);
  std::mt19937 rng(2);
  std::uniform_int_distribution<int> d(-127, 127);
  std::vector<int8_t> x(static_cast<size_t>(M * K));
  for (auto& v : x) v = static_cast<int8_t>(d(rng));
  std::vector<float> act(static_cast<size_t>(M), 0.01f), y(static_cast<size_t>(M * N));
  for (auto _ : st) {
    Gemm(q, x.data(), act.data(), M, y.data());
    benchmark::DoNotOptimize(y.data());
  }
  counters(st, M, N, K, static_cast<double>(q.bytes()));
}

void BM_Q6Head(benchmark::State& st) { BM_GroupedHead<Q6Rows, q6_gemm>(st, 3); }
void BM_Q4Head(benchmark::State& st) { BM_GroupedHead<Q4Rows, q4_gemm>(st, 2); }

// A plain AVX-512 (or, without it, AVX2) read of 1 GiB split over the threads: the bandwidth the head GEMV is
// measured against.
__attribute__((target("avx2"))) uint64_t sum_avx2(const uint64_t* p, size_t n) {
  __m256i a = _mm256_setzero_si256(), b = a;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    a = _mm256_add_epi64(a, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i)));
    b = _mm256_add_epi64(b, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 4)));
  }
  alignas(32) uint64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), _mm256_add_epi64(a, b));
  uint64_t s = lanes[0] + lanes[1] + lanes[2] + lanes[3];
  for (; i < n; ++i) s += p[i];
  return s;
}

__attribute__((target("avx512f"))) uint64_t sum_avx512(const uint64_t* p, size_t n) {
  __m512i a = _mm512_setzero_si512(), b = a;
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    a = _mm512_add_epi64(a, _mm512_load_si512(p + i));
    b = _mm512_add_epi64(b, _mm512_load_si512(p + i + 8));
  }
  uint64_t s = static_cast<uint64_t>(_mm512_reduce_add_epi64(_mm512_add_epi64(a, b)));
  for (; i < n; ++i) s += p[i];
  return s;
}

void BM_ReadBW(benchmark::State& st) {
  setup_threads();
  constexpr size_t kBytes = size_t{1} << 30;
  static uint64_t* buf = [] {
    auto* p = static_cast<uint64_t*>(std::aligned_alloc(64, kBytes));
    for (size_t i = 0; i < kBytes / 8; ++i) p[i] = i;  // touch every page
    return p;
  }();
  const int threads = num_threads();
  const size_t words = kBytes / 8;
  const bool avx512 = __builtin_cpu_supports("avx512f");
  for (auto _ : st) {
    std::vector<uint64_t> part(static_cast<size_t>(threads), 0);
    parallel_for(threads, 1, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        const size_t b = words * t / threads / 8 * 8, e = t + 1 == threads ? words : words * (t + 1) / threads / 8 * 8;
        part[t] = avx512 ? sum_avx512(buf + b, e - b) : sum_avx2(buf + b, e - b);
      }
    });
    benchmark::DoNotOptimize(part.data());
  }
  st.counters["GB/s"] = benchmark::Counter(static_cast<double>(kBytes), benchmark::Counter::kIsIterationInvariantRate,
                                           benchmark::Counter::kIs1000);
}

void head_shapes(benchmark::internal::Benchmark* b) {
  for (int64_t m : {1, 4}) b->Args({128256, 2560, m});
  b->ArgNames({"N", "K", "M"});
}

void shapes(benchmark::internal::Benchmark* b) {
  for (auto [n, k] : {std::pair<int64_t, int64_t>{256, 256}, {768, 256}, {2560, 2560}, {6912, 2560}})
    for (int64_t m : {1, 16, 64}) b->Args({n, k, m});
  b->ArgNames({"N", "K", "M"});
}

}  // namespace

BENCHMARK_CAPTURE(BM_Int8, ref, Int8Kernel::kRef)->Apply(shapes);
BENCHMARK_CAPTURE(BM_Int8, avx2, Int8Kernel::kAvx2)->Apply(shapes);
BENCHMARK_CAPTURE(BM_Int8, avx512, Int8Kernel::kAvx512)->Apply(shapes);
BENCHMARK(BM_Fp32)->Apply(shapes);
BENCHMARK_CAPTURE(BM_Int8, avx2_head, Int8Kernel::kAvx2)->Apply(head_shapes)->UseRealTime();
BENCHMARK_CAPTURE(BM_Int8, avx512_head, Int8Kernel::kAvx512)->Apply(head_shapes)->UseRealTime();
BENCHMARK(BM_Q6Head)->Apply(head_shapes)->UseRealTime();
BENCHMARK(BM_Q4Head)->Apply(head_shapes)->UseRealTime();
BENCHMARK(BM_ReadBW)->UseRealTime();
BENCHMARK_CAPTURE(BM_Linear, vectorwise, Int8Method::kVectorwise)->Apply(shapes);
BENCHMARK_CAPTURE(BM_Linear, llm_int8, Int8Method::kLlmInt8)->Apply(shapes);
BENCHMARK_CAPTURE(BM_Linear, weight_only, Int8Method::kWeightOnly)->Apply(shapes);
BENCHMARK_MAIN();
