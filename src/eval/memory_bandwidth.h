// tritium eval: measured memory read bandwidth, the denominator of every roofline ratio we report.
#pragma once

#include <cstddef>

namespace tritium {

/// Measures sustained read bandwidth in GB/s (1e9 bytes/s) by streaming a buffer of `bytes` (default 1 GiB,
/// far larger than the caches) with `threads` threads (0 = current setting), median of `reps` passes.
double measure_read_bandwidth_gbs(size_t bytes = size_t{1} << 30, int threads = 0, int reps = 5);

namespace detail {
/// Sums n 64-byte lines from p (AVX2 when available); returns a value that depends on every byte read.
unsigned long long read_lines_avx2(const void* p, size_t n_bytes);
unsigned long long read_lines_scalar(const void* p, size_t n_bytes);
}  // namespace detail

}  // namespace tritium
