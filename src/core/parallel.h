// tritium core: CPU threading. Kernels split work over output rows with parallel_for (OpenMP).
#pragma once

#include <cstdint>
#include <functional>

namespace tritium {

/// Sets the number of CPU threads kernels use (<= 0: all cores). Applies process-wide.
void set_num_threads(int n);
/// Current number of CPU threads kernels use.
int num_threads();

/// Runs fn(begin, end) over [0, n) split into contiguous chunks, one per thread, chunk
/// boundaries aligned to `grain` items. Runs inline when n is small or one thread is set.
void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

}  // namespace tritium
