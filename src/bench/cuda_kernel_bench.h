// tritium bench: the CUDA kernel table behind `tritium cuda-bench --kernels` (ternary layouts vs cuBLAS bf16 on the
// BitNet b1.58 2B4T projection shapes, against the copy bandwidth measured in the same run).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace tritium {

struct CudaKernelBenchOptions {
  int device = 0;
  int launches = 100;                  ///< launches captured in one CUDA graph; time = graph time / launches
  int reps = 5;                        ///< graph replays timed; the median is reported
  size_t rotate_bytes = size_t{512} << 20;  ///< weights are rotated over copies totalling at least this (cold L2)
  std::vector<int> batches = {1, 4, 16, 512};  ///< token counts M of the projection table
};

/// Times the CUDA kernels on the BitNet b1.58 2B4T projection shapes (2560x2560, 3840x2560, 13824x2560,
/// 2560x6912, 128256x2560) at batch 1, 4, 16 and 512 against cuBLAS bf16 on the same shapes, plus the copy
/// bandwidth measured in the same run, and returns a markdown report. Throws tritium::Error without CUDA.
std::string cuda_kernel_bench(const CudaKernelBenchOptions& o);

/// Device-to-device copy bandwidth in GB/s (bytes read + written, 2 GiB copied by a kernel, median of 5). Throws without CUDA.
double cuda_copy_bandwidth_gbs(int device = 0);

}  // namespace tritium
