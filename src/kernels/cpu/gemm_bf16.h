// tritium kernels/cpu: float32 GEMM over bfloat16 weights (an output head or projection kept as stored).
#pragma once

#include <cstdint>

namespace tritium::cpu {

/// y[m, n] = sum_k x[m, k] * f32(w[n, k]) (+ bias[n] if bias != nullptr).
/// x: [M, K] f32, w: [N, K] bf16 bit patterns (HF Linear.weight layout), y: [M, N] f32.
/// Widening bf16 to f32 is exact, and each output is reduced exactly as gemm_f32 reduces it, so the result is
/// bit for bit gemm_f32 over the widened weights while only 2 bytes per weight are read from memory.
/// Multithreaded over N.
void gemm_bf16w(const float* x, const uint16_t* w, const float* bias, float* y, int64_t M, int64_t N, int64_t K);

namespace detail {
/// AVX2: rows [n0, n1) of y, the bf16 weights widened in registers (few activation rows: decode).
void gemm_bf16w_avx2_rows(const float* x, const uint16_t* w, const float* bias, float* y, int64_t M, int64_t N,
                          int64_t K, int64_t n0, int64_t n1);
/// AVX2: dst[i] = f32(src[i]) for i < n.
void widen_bf16_avx2(const uint16_t* src, float* dst, int64_t n);
}  // namespace detail

}  // namespace tritium::cpu
