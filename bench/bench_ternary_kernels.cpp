// Google Benchmark: ternary W1.58A8 CPU kernels on the BitNet b1.58 2B4T projection shapes, per format,
// GEMV (M = 1, decode), a 4-row decode batch (M = 4, what 4 concurrent streams run) and GEMM (M = 128, prefill),
// plus this machine's two ceilings: streaming read bandwidth and the int8 multiply-accumulate rate of VNNI.
//
// Names: <gemv|gemm4|gemm128>/<format>/<N>x<K>/z<zero density>/t<threads>, readbw/<isa>/t<threads>,
// macs/avx512vnni/t<threads>, and grouped128/i2/<N>x<K>/... (the group-scaled GEMM of Ternary Bonsai, 128 rows of x,
// on the Qwen3-1.7B projection shapes).
// Counters: weight_GBps = packed weight bytes (bytes(), overhead included) streamed per second;
// tok_per_s = rows of x per second; GMACps = int8 multiply-accumulates (N x K x M) per second, to compare with
// macs/avx512vnni (vpdpbusd on registers only: 64 MACs per instruction, 8 independent chains). GEMV and the
// 4-row batch cycle through enough copies of the matrix (>= 256 MiB) that the weights come from DRAM, as in
// real decoding, not from the 32 MiB L3.
// Run: ./build/bench_ternary_kernels [--benchmark_filter=...] [--benchmark_repetitions=5 ...]
// Environment: BENCH_THREADS=1,2 (default) picks the thread counts; TRITIUM_KERNEL picks the path.
#include <benchmark/benchmark.h>
#include <immintrin.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/parallel.h"
#include "formats/ternary_format.h"
#include "kernels/cpu/ternary_kernels.h"

using namespace tritium;

namespace {

constexpr size_t kStreamBytes = size_t{256} << 20;  // DRAM-resident working set for GEMV
constexpr size_t kReadBwBytes = size_t{1} << 30;    // 1 GiB for the read-bandwidth benchmark

struct Shape {
  int64_t n, k;
};
const Shape kShapes[] = {{2560, 2560}, {3840, 2560}, {13824, 2560}, {2560, 6912}};
const double kDensities[] = {0.356, 0.42, 0.51};
const TernaryFormat kFormats[] = {TernaryFormat::kI2, TernaryFormat::kTQ1, TernaryFormat::kBitcos};

// The matrices of the benchmark running now (one configuration is kept alive at a time).
struct Matrices {
  std::string key;
  std::vector<std::unique_ptr<PackedTernary>> copies;
};
Matrices g_mats;

const std::vector<std::unique_ptr<PackedTernary>>& matrices(TernaryFormat f, Shape s, double z, bool stream) {
  const std::string key = std::string(ternary_format_name(f)) + std::to_string(s.n) + "x" + std::to_string(s.k) +
                          "z" + std::to_string(z) + (stream ? "s" : "");
  if (g_mats.key == key) return g_mats.copies;
  g_mats.copies.clear();
  std::mt19937 rng(static_cast<uint32_t>(s.n * 31 + s.k + static_cast<int64_t>(z * 1000)));
  const uint32_t zthr = static_cast<uint32_t>(z * 4294967295.0);
  std::vector<int8_t> w(static_cast<size_t>(s.n * s.k));
  for (auto& v : w) {
    const uint32_t r = rng();
    v = r < zthr ? 0 : (r & 1 ? 1 : -1);
  }
  auto first = pack_ternary(f, w.data(), s.n, s.k);
  const size_t copies = stream ? (kStreamBytes + first->bytes() - 1) / first->bytes() : 1;
  std::vector<std::span<const uint8_t>> spans;
  for (const TernaryBuffer& b : first->buffers()) spans.push_back(b.bytes);
  for (size_t i = 1; i < copies; ++i) g_mats.copies.push_back(ternary_from_buffers(f, s.n, s.k, spans, true));
  g_mats.copies.push_back(std::move(first));
  g_mats.key = key;
  return g_mats.copies;
}

void bm_ternary(benchmark::State& st, TernaryFormat f, Shape s, double z, int64_t M, int threads) {
  set_num_threads(threads);
  const auto& mats = matrices(f, s, z, M <= 4);
  std::mt19937 rng(1);
  std::vector<int8_t> x(static_cast<size_t>(M * s.k));
  for (auto& v : x) v = static_cast<int8_t>(rng());
  std::vector<int32_t> y(static_cast<size_t>(M * s.n));
  size_t i = 0;
  for (auto _ : st) {
    cpu::ternary_gemm_i32(*mats[i], x.data(), M, y.data());
    benchmark::DoNotOptimize(y.data());
    if (++i == mats.size()) i = 0;
  }
  const double bytes = static_cast<double>(mats[0]->bytes());
  st.counters["weight_GBps"] = benchmark::Counter(bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  st.counters["tok_per_s"] = benchmark::Counter(static_cast<double>(M), benchmark::Counter::kIsIterationInvariantRate);
  st.counters["bits_per_w"] = 8.0 * bytes / static_cast<double>(s.n * s.k);
  st.counters["GMACps"] = benchmark::Counter(1e-9 * static_cast<double>(s.n * s.k * M),
                                             benchmark::Counter::kIsIterationInvariantRate);
}

// Group-scaled GEMM (Ternary Bonsai: a float scale per 128 weights of a row) on the Qwen3-1.7B projection shapes,
// i2 storage, the prefill path (ternary_gemm_f32: int32 group sums, then the per-group float epilogue).
void bm_grouped(benchmark::State& st, Shape s, int64_t M, int threads) {
  set_num_threads(threads);
  const auto& mats = matrices(TernaryFormat::kI2, s, 0.42, false);
  const int64_t G = (s.k + 127) / 128;
  std::mt19937 rng(2);
  std::vector<float> scales(static_cast<size_t>(s.n * G));
  for (auto& v : scales) v = 0.01f + 0.001f * static_cast<float>(rng() % 64);
  const std::vector<float> tiled = cpu::tile_group_scales(scales.data(), s.n, G);
  std::vector<int8_t> x(static_cast<size_t>(M * s.k));
  for (auto& v : x) v = static_cast<int8_t>(static_cast<int>(rng() % 255) - 127);
  std::vector<float> act(static_cast<size_t>(M), 0.02f), y(static_cast<size_t>(M * s.n));
  for (auto _ : st) {
    cpu::ternary_gemm_f32(*mats[0], x.data(), act.data(), M, tiled.data(), y.data());
    benchmark::DoNotOptimize(y.data());
  }
  st.counters["tok_per_s"] = benchmark::Counter(static_cast<double>(M), benchmark::Counter::kIsIterationInvariantRate);
  st.counters["GMACps"] = benchmark::Counter(1e-9 * static_cast<double>(s.n * s.k * M),
                                             benchmark::Counter::kIsIterationInvariantRate);
}

// ---- int8 MAC ceiling ----------------------------------------------------------------------------------
__attribute__((target("avx512f,avx512bw,avx512vnni"))) int32_t vnni_chains(int64_t iters, int32_t seed) {
  const __m512i a = _mm512_set1_epi32(seed), b = _mm512_set1_epi32(seed * 3 + 1);
  __m512i c[8];
  for (int j = 0; j < 8; ++j) c[j] = _mm512_set1_epi32(j);
  for (int64_t i = 0; i < iters; ++i)
    for (int j = 0; j < 8; ++j) c[j] = _mm512_dpbusd_epi32(c[j], a, b);
  for (int j = 1; j < 8; ++j) c[0] = _mm512_add_epi32(c[0], c[j]);
  return _mm512_reduce_add_epi32(c[0]);
}

void bm_macs(benchmark::State& st, int threads) {
  set_num_threads(threads);
  constexpr int64_t kIters = 1 << 20;  // per thread: 8 x 64 MACs each
  for (auto _ : st) {
    std::vector<int32_t> part(static_cast<size_t>(threads), 0);
    parallel_for(threads, 1, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        part[t] = vnni_chains(kIters, static_cast<int32_t>(t + 1));
      }
    });
    benchmark::DoNotOptimize(part.data());
  }
  st.counters["GMACps"] = benchmark::Counter(1e-9 * static_cast<double>(kIters * 8 * 64 * threads),
                                             benchmark::Counter::kIsIterationInvariantRate);
}

// ---- read bandwidth ----------------------------------------------------------------------------------
__attribute__((target("avx512f"))) uint64_t sum_avx512(const uint64_t* p, size_t n) {
  __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
  for (size_t i = 0; i + 32 <= n; i += 32) {
    a0 = _mm512_add_epi64(a0, _mm512_load_si512(p + i));
    a1 = _mm512_add_epi64(a1, _mm512_load_si512(p + i + 8));
    a2 = _mm512_add_epi64(a2, _mm512_load_si512(p + i + 16));
    a3 = _mm512_add_epi64(a3, _mm512_load_si512(p + i + 24));
  }
  alignas(64) uint64_t t[8];
  _mm512_store_si512(t, _mm512_add_epi64(_mm512_add_epi64(a0, a1), _mm512_add_epi64(a2, a3)));
  return t[0] + t[1] + t[2] + t[3] + t[4] + t[5] + t[6] + t[7];
}

__attribute__((target("avx2"))) uint64_t sum_avx2(const uint64_t* p, size_t n) {
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
  for (size_t i = 0; i + 16 <= n; i += 16) {
    a0 = _mm256_add_epi64(a0, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i)));
    a1 = _mm256_add_epi64(a1, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 4)));
    a2 = _mm256_add_epi64(a2, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 8)));
    a3 = _mm256_add_epi64(a3, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 12)));
  }
  alignas(32) uint64_t t[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(t), _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3)));
  return t[0] + t[1] + t[2] + t[3];
}

void bm_readbw(benchmark::State& st, bool avx512, int threads) {
  set_num_threads(threads);
  static uint64_t* buf = [] {
    auto* p = static_cast<uint64_t*>(std::aligned_alloc(64, kReadBwBytes));
    for (size_t i = 0; i < kReadBwBytes / 8; ++i) p[i] = i;  // touch every page
    return p;
  }();
  const size_t words = kReadBwBytes / 8;
  for (auto _ : st) {
    std::vector<uint64_t> part(static_cast<size_t>(threads), 0);
    parallel_for(threads, 1, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        const size_t b = words * t / threads, e = words * (t + 1) / threads;
        part[t] = avx512 ? sum_avx512(buf + b, e - b) : sum_avx2(buf + b, e - b);
      }
    });
    benchmark::DoNotOptimize(part.data());
  }
  st.counters["read_GBps"] =
      benchmark::Counter(static_cast<double>(kReadBwBytes) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

std::vector<int> thread_counts() {
  std::vector<int> out;
  const char* e = std::getenv("BENCH_THREADS");
  std::string s = e ? e : "1,2";
  size_t p = 0;
  while (p < s.size()) {
    const size_t q = s.find(',', p);
    out.push_back(std::atoi(s.substr(p, q - p).c_str()));
    if (q == std::string::npos) break;
    p = q + 1;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  for (int t : thread_counts()) {
    for (bool avx512 : {true, false}) {
      if (avx512 && !__builtin_cpu_supports("avx512f")) continue;
      benchmark::RegisterBenchmark(("readbw/" + std::string(avx512 ? "avx512" : "avx2") + "/t" + std::to_string(t)).c_str(),
                                   [=](benchmark::State& st) { bm_readbw(st, avx512, t); })
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
    }
    if (__builtin_cpu_supports("avx512vnni"))
      benchmark::RegisterBenchmark(("macs/avx512vnni/t" + std::to_string(t)).c_str(),
                                   [=](benchmark::State& st) { bm_macs(st, t); })
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
    for (int64_t M : {int64_t{1}, int64_t{4}, int64_t{128}}) {
      for (const Shape& s : kShapes) {
        for (double z : kDensities) {
          for (TernaryFormat f : kFormats) {
            char name[160];
            std::snprintf(name, sizeof name, "%s/%s/%ldx%ld/z%.3f/t%d", M == 1 ? "gemv" : M == 4 ? "gemm4" : "gemm128",
                          std::string(ternary_format_name(f)).c_str(), static_cast<long>(s.n),
                          static_cast<long>(s.k), z, t);
            benchmark::RegisterBenchmark(name, [=](benchmark::State& st) { bm_ternary(st, f, s, z, M, t); })
                ->UseRealTime()
                ->Unit(benchmark::kMicrosecond);
          }
        }
      }
    }
  }
  for (int t : thread_counts()) {
    for (const Shape& s : {Shape{4096, 2048}, Shape{2048, 2048}, Shape{12288, 2048}, Shape{2048, 6144}}) {
      char name[160];
      std::snprintf(name, sizeof name, "grouped128/i2/%ldx%ld/z0.420/t%d", static_cast<long>(s.n),
                    static_cast<long>(s.k), t);
      benchmark::RegisterBenchmark(name, [=](benchmark::State& st) { bm_grouped(st, s, 128, t); })
          ->UseRealTime()
          ->Unit(benchmark::kMicrosecond);
    }
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
