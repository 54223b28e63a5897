#include "core/parallel.h"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

namespace tritium {
namespace {

std::atomic<int> g_threads{0};

// Pause iterations a waiting thread spins before it sleeps in the kernel (futex, std::atomic::wait): about
// 50-100 us on current x86 cores, longer than the single-threaded gaps between the kernels of one forward pass
// (norms, RoPE, sampling) and short enough that a busy machine gets the core back instead of a spinning waiter.
constexpr int kSpin = 4096;

template <class T>
void spin_then_wait(const std::atomic<T>& a, T old) {
  for (int i = 0; i < kSpin; ++i) {
    if (a.load(std::memory_order_acquire) != old) return;
    _mm_pause();
  }
  while (a.load(std::memory_order_acquire) == old) a.wait(old, std::memory_order_acquire);
}

// Persistent worker threads for parallel_for. Worker w (1-based) runs part w of each job; the calling thread
// runs part 0 and then waits for the others.
class Pool {
 public:
  ~Pool() {
    stop_.store(true, std::memory_order_release);
    job_.fetch_add(kPartsMask + 1, std::memory_order_release);
    job_.notify_all();
    for (auto& t : workers_) t.join();
  }

  // Runs part(t) for t in [0, parts). Returns false (running nothing) when the pool is busy: a nested call from
  // inside a part, or a call from another thread meanwhile.
  bool run(int parts, const std::function<void(int)>& part) {
    std::unique_lock lock(mu_, std::try_to_lock);
    if (!lock.owns_lock()) return false;
    while (static_cast<int>(workers_.size()) < parts - 1) {
      const int w = static_cast<int>(workers_.size()) + 1;
      workers_.emplace_back([this, w] { work(w); });
    }
    part_ = &part;
    remaining_.store(parts - 1, std::memory_order_relaxed);
    const uint64_t next = ((job_.load(std::memory_order_relaxed) >> kPartsBits) + 1) << kPartsBits;
    job_.store(next | static_cast<uint64_t>(parts), std::memory_order_release);
    job_.notify_all();
    part(0);
    for (int left = remaining_.load(std::memory_order_acquire); left != 0;
         left = remaining_.load(std::memory_order_acquire))
      spin_then_wait(remaining_, left);
    return true;
  }

 private:
  // A worker given a part of job J keeps J posted (run() waits for it), so part_ is J's while it runs; a worker
  // without a part may see a later job word and simply takes that one.
  void work(int w) {
    uint64_t seen = 0;
    for (;;) {
      spin_then_wait(job_, seen);
      seen = job_.load(std::memory_order_acquire);
      if (stop_.load(std::memory_order_acquire)) return;
      if (w >= static_cast<int>(seen & kPartsMask)) continue;
      (*part_)(w);
      if (remaining_.fetch_sub(1, std::memory_order_acq_rel) == 1) remaining_.notify_one();
    }
  }

  static constexpr int kPartsBits = 10;
  static constexpr uint64_t kPartsMask = (uint64_t{1} << kPartsBits) - 1;

  std::mutex mu_;
  std::vector<std::thread> workers_;
  std::atomic<uint64_t> job_{0};  ///< (job number << kPartsBits) | parts of the posted job
  std::atomic<int> remaining_{0};
  std::atomic<bool> stop_{false};
  const std::function<void(int)>* part_ = nullptr;
};

Pool& pool() {
  static Pool p;
  return p;
}

}  // namespace

void set_num_threads(int n) {
  if (n <= 0) n = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  g_threads.store(n);
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
  const int nt = static_cast<int>(std::min<int64_t>(std::min(num_threads(), 1023), units));
  if (nt <= 1) {
    fn(0, n);
    return;
  }
  const std::function<void(int)> part = [&](int t) {
    const int64_t u0 = units * t / nt, u1 = units * (t + 1) / nt;
    const int64_t b = u0 * grain, e = std::min(n, u1 * grain);
    if (b < e) fn(b, e);
  };
  // Busy (nested or concurrent call): the parts run here one after another, the same split, the same results.
  if (!pool().run(nt, part))
    for (int t = 0; t < nt; ++t) part(t);
}

}  // namespace tritium
