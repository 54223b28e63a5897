// tritium bench: the group-scaled ternary kernel table of `tritium cuda-bench --grouped-kernels` (no CUDA headers).
#pragma once

#include <string>

namespace tritium {

struct CudaKernelBenchOptions;

/// Times cuda::ternary_grouped_matmul (tc2 codes + float32 scales per row and group of 128, the Ternary Bonsai
/// kernel: dp4a up to 8 tokens, int8 tensor cores above) on the Qwen3-8B projection shapes (N x K: qkv 6144x4096,
/// o 4096x4096, gate_up 24576x4096, down 4096x12288) at the token counts o.batches, against cuBLASLt's int8 GEMM
/// over an int8 copy of the same weights (int32 out, no epilogue: what a per-tensor model's batched rows would run)
/// and cuBLAS bf16, weights rotated over copies larger than L2 (cold). Returns a markdown table with the
/// microseconds, the ratios, the weight bandwidth against the copy bandwidth measured in the same run and, above
/// 8 tokens, the time of each warp tiling of the tensor-core kernel.
/// Throws tritium::Error without CUDA.
std::string cuda_grouped_kernel_bench(const CudaKernelBenchOptions& o);

}  // namespace tritium
