// tritium core: CPU threading. Kernels split work over output rows with parallel_for, run by a pool of persistent
// threads that spin briefly between jobs and then sleep, so a busy machine never has a waiter burning its core.
// A job is cut into a few chunks per thread that threads take as they come free, so a descheduled worker's share
// is done by the others instead of holding up the join.
#pragma once

#include <cstdint>
#include <functional>

namespace tritium {

/// Sets the number of CPU threads kernels use (<= 0: all cores). Applies process-wide.
void set_num_threads(int n);
/// Current number of CPU threads kernels use.
int num_threads();

/// Runs fn(begin, end) over [0, n) split into contiguous chunks (up to 4 per thread; which thread runs a chunk
/// varies, the boundaries do not), chunk boundaries aligned to `grain` items. Runs inline when n is small or one thread is set; a call made while the
/// pool is busy (from inside fn, or from another thread) runs its chunks one after another on the calling thread
/// (the same chunks, so the same results).
void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

}  // namespace tritium
