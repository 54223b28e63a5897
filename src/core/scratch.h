// tritium core: grow-only scratch buffers for hot paths. A forward pass that allocated its activations, quantized
// inputs and accumulators afresh for every layer paid for it twice: large blocks come back from the kernel as new
// pages (a fault and a zero-fill per 4 KiB page on every use), and the blocks freed between layers fragment the
// allocator's per-thread arenas, so the peak RSS of the same run varied by hundreds of MiB. A Scratch keeps its
// largest block and hands it out again; the memory it holds is the largest batch seen so far.
#pragma once

#include <cstddef>
#include <memory>

namespace tritium {

/// A buffer of T that only grows. get(n) returns storage for at least n elements: uninitialized when it grows, the
/// previous contents otherwise (callers write what they read). The pointer is valid until the next get() with a
/// larger n. Not thread-safe: give each thread its own (a thread_local or a member of a single-threaded owner).
template <class T>
class Scratch {
 public:
  T* get(size_t n) {
    if (n > capacity_) {
      // Half again on growth, so buffers sized by a growing context (one more token per decode step) reallocate
      // O(log n) times, not once per step.
      const size_t cap = n > capacity_ + capacity_ / 2 ? n : capacity_ + capacity_ / 2;
      data_.reset();  // release first: the old block is never needed again and the peak should not hold both
      data_ = std::make_unique_for_overwrite<T[]>(cap);
      capacity_ = cap;
    }
    return data_.get();
  }
  size_t capacity() const { return capacity_; }

 private:
  std::unique_ptr<T[]> data_;
  size_t capacity_ = 0;
};

}  // namespace tritium
