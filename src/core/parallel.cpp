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
// True on a thread while it runs a chunk of a parallel_for: a parallel_for called from inside one runs inline.
thread_local bool t_in_chunk = false;

// Pause iterations a waiting thread spins before it sleeps in the kernel (futex, std::atomic::wait): about
// 50-100 us on current x86 cores, longer than the single-threaded gaps between the kernels of one forward pass
// (norms, RoPE, sampling) and short enough that a busy machine gets the core back instead of a spinning waiter.
constexpr int kSpin = 4096;
// Chunks per thread: a job is cut into more chunks than threads and every thread takes the next free one, so
// when the machine deschedules a worker the others (the caller included) do its share instead of waiting for it.
constexpr int kChunksPerThread = 4;

template <class T>
void spin_then_wait(const std::atomic<T>& a, T old) {
  for (int i = 0; i < kSpin; ++i) {
    if (a.load(std::memory_order_acquire) != old) return;
    _mm_pause();
  }
  while (a.load(std::memory_order_acquire) == old) a.wait(old, std::memory_order_acquire);
}

// Persistent worker threads for parallel_for. The caller posts a job (the function and its chunk count) and takes
// chunks itself; woken workers take chunks until none is left; the caller returns when every chunk has run.
class Pool {
 public:
  ~Pool() {
    stop_.store(true, std::memory_order_release);
    wake_.fetch_add(1, std::memory_order_release);
    wake_.notify_all();
    for (auto& t : workers_) t.join();
  }

  // Runs chunk(c) for c in [0, chunks) on up to `threads` threads. Returns false (running nothing) when the pool
  // is busy: a nested call from inside a chunk (t_in_chunk, checked before the lock, which the caller of the
  // outer call may hold), or a call from another thread meanwhile.
  bool run(int threads, int64_t chunks, const std::function<void(int64_t)>& chunk) {
    if (t_in_chunk) return false;
    std::unique_lock lock(mu_, std::try_to_lock);
    if (!lock.owns_lock()) return false;
    while (static_cast<int>(workers_.size()) < threads - 1) workers_.emplace_back([this] { work(); });
    chunk_ = &chunk;
    done_.store(0, std::memory_order_relaxed);
    ++job_;
    next_.store(word(job_, chunks, 0), std::memory_order_release);
    wake_.fetch_add(1, std::memory_order_release);
    wake_.notify_all();
    take_chunks(job_);
    for (int64_t d = done_.load(std::memory_order_acquire); d != chunks; d = done_.load(std::memory_order_acquire))
      spin_then_wait(done_, d);
    return true;
  }

 private:
  // next_ holds (job << 40) | (chunks << 20) | next free chunk, so a thread claims a chunk of the job it saw and
  // no other: a late worker's claim on a finished job fails. While a thread holds a claimed chunk the job cannot
  // finish, so chunk_ is still that job's function.
  static constexpr int kBits = 20;
  static constexpr uint64_t kMask = (uint64_t{1} << kBits) - 1;
  static uint64_t word(uint64_t job, int64_t chunks, int64_t next) {
    return (job << (2 * kBits)) | (static_cast<uint64_t>(chunks) << kBits) | static_cast<uint64_t>(next);
  }

  void take_chunks(uint64_t job) {
    uint64_t v = next_.load(std::memory_order_acquire);
    for (;;) {
      if ((v >> (2 * kBits)) != (job & ((uint64_t{1} << (64 - 2 * kBits)) - 1))) return;
      const int64_t chunks = static_cast<int64_t>((v >> kBits) & kMask), c = static_cast<int64_t>(v & kMask);
      if (c >= chunks) return;
      if (!next_.compare_exchange_weak(v, v + 1, std::memory_order_acq_rel, std::memory_order_acquire)) continue;
      {
        struct InChunk {
          InChunk() { t_in_chunk = true; }
          ~InChunk() { t_in_chunk = false; }
        } in_chunk;
        (*chunk_)(c);
      }
      if (done_.fetch_add(1, std::memory_order_acq_rel) + 1 == chunks) done_.notify_one();
      v = next_.load(std::memory_order_acquire);
    }
  }

  void work() {
    uint64_t seen = 0;
    for (;;) {
      spin_then_wait(wake_, seen);
      seen = wake_.load(std::memory_order_acquire);
      if (stop_.load(std::memory_order_acquire)) return;
      take_chunks(next_.load(std::memory_order_acquire) >> (2 * kBits));
    }
  }

  std::mutex mu_;
  std::vector<std::thread> workers_;
  uint64_t job_ = 0;                 ///< number of the last posted job (caller side)
  std::atomic<uint64_t> next_{0};    ///< see word()
  std::atomic<uint64_t> wake_{0};    ///< bumped once per job: workers sleep on it
  std::atomic<int64_t> done_{0};     ///< chunks of the current job that have run
  std::atomic<bool> stop_{false};
  const std::function<void(int64_t)>* chunk_ = nullptr;
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
  const int nt = static_cast<int>(std::min<int64_t>(std::min(num_threads(), 1024), units));
  if (nt <= 1) {
    fn(0, n);
    return;
  }
  const int64_t chunks = std::min<int64_t>(units, static_cast<int64_t>(nt) * kChunksPerThread);
  const std::function<void(int64_t)> chunk = [&](int64_t c) {
    const int64_t u0 = units * c / chunks, u1 = units * (c + 1) / chunks;
    const int64_t b = u0 * grain, e = std::min(n, u1 * grain);
    if (b < e) fn(b, e);
  };
  // Busy (nested or concurrent call): the chunks run here one after another, the same split, the same results.
  if (!pool().run(nt, chunks, chunk))
    for (int64_t c = 0; c < chunks; ++c) chunk(c);
}

}  // namespace tritium
