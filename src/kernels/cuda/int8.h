// tritium kernels/cuda: the GPU side of the int8 linear layers (LLM.int8(), Dettmers et al. 2022; the arithmetic
// of every method is the one of src/quant/int8_projection.h, which these kernels reproduce bit for bit).
//
// Only code built with TRITIUM_HAVE_CUDA includes this header. Device pointers in, launches on `stream`, nothing
// synchronizes; every wrapper throws tritium::Error on a launch error.
//
// Layouts on the GPU:
//  - weights int8 [np, kp] row-major: the CPU codes [n, k] zero-padded to np = round_up(n, 16) rows and
//    kp = round_up(k, 16) columns (cuBLASLt's int8 tensor-core kernels want 16-byte aligned rows; the dp4a GEMV
//    reads 16-byte vectors). Zero padding adds nothing to any integer sum.
//  - quantized activations int8 [rows, kp], zero past k.
//  - int32 accumulators [rows, np] (row-major; the column-major N x M matrix of cuBLASLt with ld = np).
//
// Requests: the rows of one request (one sequence of the batch) are contiguous and carry the same request id
// (`seq[r]`, non-decreasing over r; through `row_map` when the rows are a selection: id = seq[row_map[r]]);
// seq == nullptr makes the whole batch one request. Every statistic that spans rows (per-tensor activation
// scales, zero points, the LLM.int8() outlier columns) is taken over the rows of one request only, so a row's
// result never depends on the other requests in the batch.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace tritium::cuda {

/// Activation quantization of an int8 projection (see Int8Method): per request absmax (kAbsmax and kRowwise),
/// per request zero-point, per row absmax (vector-wise), LLM.int8() (per request outlier columns, per row absmax
/// over the other columns).
enum class Int8ActMode { kAbsmaxPerRequest = 0, kZeropointPerRequest = 1, kAbsmaxPerRow = 2, kLlmInt8 = 3 };

/// Device buffers of int8_quantize_activations, capacity `rows` x the given widths (see Int8Workspace).
struct Int8ActBuffers {
  int8_t* xq = nullptr;       ///< [rows, kp] codes
  float* sx = nullptr;        ///< [rows] dequantization step of each row's codes
  int32_t* zx = nullptr;      ///< [rows] zero point (zero-point mode; 0 otherwise)
  int32_t* sumq = nullptr;    ///< [rows] sum of each row's codes (zero-point mode)
  int32_t* gb = nullptr;      ///< [rows] first row of each row's request
  int32_t* ge = nullptr;      ///< [rows] one past the last row of each row's request
  float* stat = nullptr;      ///< [rows, 3] absmax, min, max of the row (request totals at each request's first row)
  uint32_t* mask = nullptr;   ///< [rows, kw] |x| >= alpha bits (request OR at each request's first row); kw = ceil(k/32)
  int32_t* has_out = nullptr; ///< [rows] at a request's first row: whether the request has any outlier column
  uint32_t* umask = nullptr;  ///< [kw] union of the outlier columns over the batch
  int32_t* ucols = nullptr;   ///< [k + 1] the union's columns, ascending; ucols[k] = their count
};

/// Quantizes x float32 [rows, k] (row stride ldx) into b.xq [rows, kp] and the per-row parameters, with the
/// statistics of `mode` taken per request (see the file comment). alpha: the LLM.int8() outlier threshold.
/// Matches Int8Projection::forward exactly: fp32 scales 127 / absmax and absmax / 127 correctly rounded, codes
/// round_half_even(double(x) * double(inv)) clamped to [-127, 127].
void int8_quantize_activations(const float* x, int64_t ldx, int rows, int k, int kp, Int8ActMode mode, float alpha,
                               const int32_t* seq, const int32_t* row_map, const Int8ActBuffers& b,
                               cudaStream_t stream);

/// dp4a GEMV/GEMM for small batches (1 <= M <= 8): acc[m * ldc + n] = sum_k xq[m, k] * w[n, k] for n < np
/// (exact int32). w int8 [np, kp], xq int8 [M, kp]; kp a multiple of 16, pointers 16-byte aligned.
void int8_gemv_dp4a(const int8_t* w, int np, int kp, const int8_t* xq, int M, int32_t* acc, int64_t ldc,
                    cudaStream_t stream);

/// The dequantization epilogue of an int8 projection, everything after the integer product (Int8Projection::forward
/// steps 3-5), in fp32 with the CPU's operation order (no contraction):
///   y = float(acc[m, n]) * (sx[m] * sw[n])                          (zero-point: float(exact int64 corrected acc))
///   LLM.int8(): y += sum_{c in O(m), ascending} x[m, c] * w16(n, c)  (fp32, O(m) = the outlier columns of m's request)
///   y += bias[n];  out[m, n] = add ? out[m, n] + y : y.
struct Int8Epilogue {
  const int32_t* acc = nullptr;  ///< [rows, ldacc]
  int64_t ldacc = 0;
  int n = 0, k = 0, kp = 0;
  const float* sw = nullptr;     ///< weight scales [n] (or [1] when per_tensor)
  bool per_tensor = false;
  const float* bias = nullptr;   ///< [n] or null
  // zero-point
  bool zeropoint = false;
  int32_t zw = 0;                ///< weight zero point
  const int32_t* w_row_sum = nullptr;  ///< [n] sum_k q[n, k]
  // LLM.int8()
  bool llm = false;
  const float* x = nullptr;      ///< the float input rows [rows, ldx]
  int64_t ldx = 0;
  const uint16_t* w16t = nullptr;  ///< fp16 weights transposed [k, n] (kFp16Copy) or null
  const int8_t* wq = nullptr;      ///< int8 codes [np, kp] (kInt8Dequant: w16(n, c) = float(q[n, c]) * sw[n])
  float* out = nullptr;
  int64_t ldout = 0;
  bool add = false;
};
void int8_dequant_epilogue(const Int8Epilogue& e, const Int8ActBuffers& b, int rows, cudaStream_t stream);

/// Weight-only int8: out[m, n] (+)= sw[n] * sum_k x[m, k] * float(w[n, k]) (+ bias[n]); fp32 accumulation in a
/// fixed order that does not depend on the batch (it differs from the CPU's order in the last bits).
/// x float32 [rows, k] (stride ldx), w int8 [np, kp].
void int8_weight_only(const float* x, int64_t ldx, int rows, const int8_t* w, int n, int k, int kp, const float* sw,
                      const float* bias, float* out, int64_t ldout, bool add, cudaStream_t stream);

}  // namespace tritium::cuda
