#include "core/parallel.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <thread>

namespace tritium {
namespace {
std::atomic<int> g_threads{0};
}

void set_num_threads(int n) {
  if (n <= 0) n = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  g_threads.store(n);
  omp_set_num_threads(n);
}

int num_threads() {
  int n = g_threads.load();
  if (n <= 0) {
    n = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  }
  return n;
}

void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  const int64_t units = (n + grain - 1) / grain;
  const int nt = static_cast<int>(std::min<int64_t>(num_threads(), units));
  if (nt <= 1) {
    fn(0, n);
    return;
  }
#pragma omp parallel num_threads(nt)
  {
    const int t = omp_get_thread_num();
    const int64_t u0 = units * t / nt, u1 = units * (t + 1) / nt;
    const int64_t b = u0 * grain, e = std::min(n, u1 * grain);
    if (b < e) fn(b, e);
  }
}

}  // namespace tritium
