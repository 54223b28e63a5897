// tritium kernels/cpu: float32 GEMM for the 16/32-bit projections (Llama/Qwen2 bf16 models, lm_head).
#pragma once

#include <cstdint>

namespace tritium::cpu {

/// y[m, n] = sum_k x[m, k] * w[n, k] (+ bias[n] if bias != nullptr).
/// x: [M, K] f32, w: [N, K] f32 (HF Linear.weight layout), y: [M, N] f32.
/// Each output element is reduced in the same order whatever M is (batch-invariant results).
/// Multithreaded over N; AVX2/FMA path chosen at run time when the CPU has it.
void gemm_f32(const float* x, const float* w, const float* bias, float* y, int64_t M, int64_t N, int64_t K);

/// Portable reference with the identical reduction order as the SIMD path (8 interleaved partial sums).
void gemm_f32_ref(const float* x, const float* w, const float* bias, float* y, int64_t M, int64_t N, int64_t K);

namespace detail {
void gemm_f32_avx2_rows(const float* x, const float* w, const float* bias, float* y, int64_t M, int64_t N,
                        int64_t K, int64_t n0, int64_t n1);
void gemm_f32_ref_rows(const float* x, const float* w, const float* bias, float* y, int64_t M, int64_t N,
                       int64_t K, int64_t n0, int64_t n1);
}  // namespace detail

}  // namespace tritium::cpu
