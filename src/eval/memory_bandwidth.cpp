#include "eval/memory_bandwidth.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "core/parallel.h"

namespace tritium {
namespace detail {
unsigned long long read_lines_scalar(const void* p, size_t n_bytes) {
  const uint64_t* q = static_cast<const uint64_t*>(p);
  uint64_t a = 0, b = 0, c = 0, d = 0;
  for (size_t i = 0; i + 4 <= n_bytes / 8; i += 4) {
    a ^= q[i]; b ^= q[i + 1]; c ^= q[i + 2]; d ^= q[i + 3];
  }
  return a ^ b ^ c ^ d;
}
}  // namespace detail

double measure_read_bandwidth_gbs(size_t bytes, int threads, int reps) {
  if (threads <= 0) threads = num_threads();
  bytes &= ~size_t{4095};
  std::unique_ptr<uint8_t[], void (*)(uint8_t*)> buf(static_cast<uint8_t*>(std::aligned_alloc(64, bytes)),
                                                     [](uint8_t* p) { std::free(p); });
  // Touch every page with non-zero data (first touch by the thread that will read it).
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    const size_t b = bytes / nt * t, e = t == nt - 1 ? bytes : bytes / nt * (t + 1);
    for (size_t i = b; i < e; ++i) buf[i] = static_cast<uint8_t>(i * 131 + 7);
  }
  const bool avx2 = __builtin_cpu_supports("avx2");
  std::vector<double> gbs;
  volatile unsigned long long sink = 0;
  for (int r = 0; r < reps + 1; ++r) {
    unsigned long long acc = 0;
    const auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel num_threads(threads) reduction(^ : acc)
    {
      const int t = omp_get_thread_num(), nt = omp_get_num_threads();
      const size_t chunk = (bytes / nt) & ~size_t{63};
      const size_t b = chunk * t, n = t == nt - 1 ? bytes - b : chunk;
      acc ^= avx2 ? detail::read_lines_avx2(buf.get() + b, n) : detail::read_lines_scalar(buf.get() + b, n);
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    sink = sink ^ acc;
    if (r > 0) gbs.push_back(static_cast<double>(bytes) / s / 1e9);  // first pass is a warm-up
  }
  (void)sink;
  std::sort(gbs.begin(), gbs.end());
  return gbs[gbs.size() / 2];
}

}  // namespace tritium
