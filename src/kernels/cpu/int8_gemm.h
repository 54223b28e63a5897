// tritium CPU kernels: int8 x int8 -> int32 GEMV/GEMM (the integer core of LLM.int8() / W8A8).
//
// All kernels compute, exactly (integer arithmetic, no saturation),
//   acc[m * N + n] = sum_k x[m * K + k] * w[n * K + k]      for m < M, n < N
// with x int8 [M, K] row-major (quantized activations, one row per token) and w int8 [N, K]
// row-major (quantized weights in the HF Linear.weight layout: one row per output feature).
// Every variant returns bit-identical results; the result for row m never depends on M or on
// the other rows (no batch-dependent blocking of the reduction can change an exact integer sum).
//
// Value range contract: x and w must lie in [-127, 127] (the quantizers in src/quant never
// produce -128). The AVX2 kernel relies on it (sign trick with vpmaddubsw cannot saturate when
// |x|, |w| <= 127). K <= kInt8GemmMaxK keeps every partial sum inside int32 in all variants
// (the VNNI kernel accumulates (x + 128) * w before its correction, |.| <= 255 * 127 * K).
#pragma once

#include <cstdint>
#include <string_view>

namespace tritium {

/// Largest reduction length the int8 kernels accept (255 * 127 * K must fit in int32).
inline constexpr int64_t kInt8GemmMaxK = 65536;

/// Instruction-set variants of the CPU integer kernels.
///  - kRef:    portable scalar loops (the reference every fast kernel is tested against).
///  - kAvx2:   vpmaddubsw/vpmaddwd with the abs/sign trick for signed x signed bytes.
///  - kAvx512: AVX-512 VNNI vpdpbusd on (x + 128) as unsigned bytes, minus 128 * rowsum(w).
enum class Int8Kernel { kRef, kAvx2, kAvx512 };

/// "ref" / "avx2" / "avx512".
std::string_view int8_kernel_name(Int8Kernel k);

/// Parses "ref" / "avx2" / "avx512"; throws tritium::Error naming `what` otherwise.
Int8Kernel parse_int8_kernel(std::string_view s, std::string_view what = "kernel");

/// Whether this CPU can run the variant (kRef always; checks __builtin_cpu_supports).
bool int8_kernel_supported(Int8Kernel k);

/// The variant used by default: the env var TRITIUM_KERNEL=ref|avx2|avx512 when set (the same
/// variable the ternary kernels read), else the best one this CPU supports. Read once and cached.
/// Throws tritium::Error when TRITIUM_KERNEL names an unknown variant or one this CPU lacks.
Int8Kernel int8_default_kernel();

/// Row sums of an int8 matrix: out[n] = sum_k w[n * K + k]. The VNNI kernel needs them for its
/// +128 offset correction; precompute once per weight matrix.
void int8_row_sums(const int8_t* w, int64_t N, int64_t K, int32_t* out);

/// int8 GEMM/GEMV (M = 1 is the GEMV case): acc int32 [M, N] = x [M, K] . w[N, K]^T.
/// w_row_sum: int32 [N] from int8_row_sums (required by kAvx512, may be null for the others).
/// Multithreaded over output features with tritium::parallel_for.
/// Throws tritium::Error on negative sizes, K > kInt8GemmMaxK, a missing w_row_sum for kAvx512,
/// or a variant this CPU does not support.
void gemm_s8s8_s32(const int8_t* x, const int8_t* w, const int32_t* w_row_sum, int64_t M, int64_t N,
                   int64_t K, int32_t* acc, Int8Kernel kernel);

/// Same, using int8_default_kernel().
inline void gemm_s8s8_s32(const int8_t* x, const int8_t* w, const int32_t* w_row_sum, int64_t M,
                          int64_t N, int64_t K, int32_t* acc) {
  gemm_s8s8_s32(x, w, w_row_sum, M, N, K, acc, int8_default_kernel());
}

/// Weight-only int8 GEMM (W8A16-style, activations stay float):
///   y[m * N + n] = w_scale[n] * sum_k x[m * K + k] * float(w[n * K + k])   (fp32 accumulation)
/// x float32 [M, K], w int8 [N, K], w_scale float32 [N], y float32 [M, N]. The summation order is
/// fixed per kernel variant and independent of M (batch independent), but differs between
/// variants in the last bits (fp32 sums in a different order).
void gemm_f32s8_f32(const float* x, const int8_t* w, const float* w_scale, int64_t M, int64_t N,
                    int64_t K, float* y, Int8Kernel kernel);

// ---- variant entry points (defined in int8_gemm_{ref,avx2,avx512}.cpp; use gemm_s8s8_s32) ----
namespace int8_detail {
/// Computes rows n in [n0, n1) of acc for all M rows of x.
void gemm_ref(const int8_t* x, const int8_t* w, int64_t M, int64_t N, int64_t K, int32_t* acc,
              int64_t n0, int64_t n1);
void gemm_avx2(const int8_t* x, const int8_t* w, int64_t M, int64_t N, int64_t K, int32_t* acc,
               int64_t n0, int64_t n1);
/// xu: x with 0x80 xor-ed into every byte (x + 128 as uint8), [M, K].
void gemm_avx512(const uint8_t* xu, const int8_t* w, const int32_t* w_row_sum, int64_t M, int64_t N,
                 int64_t K, int32_t* acc, int64_t n0, int64_t n1);
void gemm_f32s8_ref(const float* x, const int8_t* w, const float* w_scale, int64_t M, int64_t N,
                    int64_t K, float* y, int64_t n0, int64_t n1);
void gemm_f32s8_avx2(const float* x, const int8_t* w, const float* w_scale, int64_t M, int64_t N,
                     int64_t K, float* y, int64_t n0, int64_t n1);
void gemm_f32s8_avx512(const float* x, const int8_t* w, const float* w_scale, int64_t M, int64_t N,
                       int64_t K, float* y, int64_t n0, int64_t n1);
}  // namespace int8_detail

}  // namespace tritium
