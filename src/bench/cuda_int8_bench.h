// tritium bench: the int8 GEMM benchmark of `tritium cuda-bench --int8-kernels` (no CUDA headers needed).
#pragma once

#include <string>

namespace tritium {

struct CudaKernelBenchOptions;

/// Times the int8 projection on the GPU on Qwen2-1.5B shapes (8960x1536 gate/up, 1536x8960 down; N x K) at
/// M = 1, 16, 512: the integer GEMM alone (dp4a GEMV, cuBLASLt int8 tensor cores) and the whole vector-wise and
/// LLM.int8() forward (activation quantization + GEMM + epilogue; LLM.int8() with 4 outlier columns), against
/// cuBLAS bf16 on the same shape, weights rotated over copies larger than L2 (cold). Returns a markdown table.
/// Throws tritium::Error without CUDA.
std::string cuda_int8_kernel_bench(const CudaKernelBenchOptions& o);

}  // namespace tritium
