// tritium quant: a linear layer y = x W^T + b with W quantized by one Int8Method, computing exactly
// that method's arithmetic on the CPU (LLM.int8(), Dettmers et al. 2022).
//
// Forward, for x float32 [M, K] (one row per token) and the row partition into requests:
//  1. Activation quantization from the float values before quantization:
//       kAbsmax / kRowwise: one absmax over all of a request's rows -> one scale per request;
//       kZeropoint:         min / max over the request's rows -> asymmetric params per request;
//       kVectorwise:        absmax of each row (per token);
//       kLlmInt8:           outlier columns O_r = { c : |x[m, c]| >= alpha for some row m of request r };
//                           per-token absmax over the columns NOT in O_r; columns in O_r enter the
//                           int8 product as 0.
//  2. int8 x int8 -> int32 GEMM (src/kernels/cpu/int8_gemm.h), exact.
//  3. Dequantization in fp32, the int32 (or, for zero-point, the exactly corrected int64 integer)
//     kept until this single step: y = float(acc) * (sx[m] * sw[n]), the outer product of the
//     activation-row scale and the weight-row scale. Nothing goes through fp16.
//       zero-point: acc' = acc - zw * sum_k qx[m,k] - zx * sum_k qw[n,k] + K * zx * zw (integers).
//  4. kLlmInt8 only: + sum_{c in O_r, ascending} x[m, c] * w16[n, c] with 16-bit weights and fp32
//     accumulation (w16 = fp16 copy or dequantized int8 column, see OutlierWeights).
//  5. + bias[n] (fp32).
//  kWeightOnly: y = sw[n] * sum_k x[m, k] * q[n, k] (fp32 accumulation) + bias[n].
//
// Batch independence: every statistic that spans several rows (per-tensor scales, zero points, the
// outlier set) is computed per request, over that request's rows only, and every per-element
// reduction has a fixed order. So the output rows of a request are bit-identical whether it runs
// alone or batched with others, provided the caller passes the row partition. Without a partition
// the whole batch is one request (the paper's formulation: the outlier set is the union over all
// rows of x) and results then depend on the batch composition.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kernels/cpu/int8_gemm.h"
#include "quant/int8_quant.h"

namespace tritium {

/// Options of an Int8Projection.
struct Int8ProjectionOptions {
  /// LLM.int8() outlier threshold alpha: a column is an outlier when some |x| >= alpha.
  float outlier_threshold = 6.0f;
  /// LLM.int8() source of the 16-bit outlier-column weights (memory trade-off, see the enum).
  OutlierWeights outlier_weights = OutlierWeights::kFp16Copy;
  /// Kernel variant; default: int8_default_kernel() (TRITIUM_KERNEL or the best supported).
  Int8Kernel kernel = int8_default_kernel();
};

/// Optional diagnostics of one forward call.
struct Int8ForwardInfo {
  /// kLlmInt8: ascending outlier columns of each request (one vector per request); else empty.
  std::vector<std::vector<int32_t>> outlier_columns;
};

/// A quantized linear layer. Immutable after construction; forward is thread-compatible (const).
class Int8Projection {
 public:
  /// Quantizes W float32 [N, K] (row-major, HF Linear.weight) by `method`; bias float32 [N] or
  /// null. Throws tritium::Error on bad shapes, non-finite weights, or a bad option.
  Int8Projection(Int8Method method, const float* w, int64_t n, int64_t k, const float* bias = nullptr,
             Int8ProjectionOptions opt = {});
  /// Wraps an already quantized weight (e.g. produced offline).
  explicit Int8Projection(Int8Weight weight, std::vector<float> bias = {}, Int8ProjectionOptions opt = {});

  /// y float32 [M, N] = f(x float32 [M, K]) per the file comment.
  /// row_begin: first row of each request in the flattened batch (row_begin[0] == 0, strictly
  /// increasing, all < M); empty = the whole batch is one request. Throws tritium::Error on a bad
  /// partition or a non-finite input.
  void forward(const float* x, int64_t M, float* y, std::span<const int64_t> row_begin = {},
               Int8ForwardInfo* info = nullptr) const;

  int64_t out_features() const { return w_.n; }
  int64_t in_features() const { return w_.k; }
  Int8Method method() const { return w_.method; }
  const Int8Weight& weight() const { return w_; }
  const std::vector<float>& bias() const { return bias_; }
  const Int8ProjectionOptions& options() const { return opt_; }

 private:
  Int8Weight w_;
  std::vector<float> bias_;
  Int8ProjectionOptions opt_;
};

}  // namespace tritium
