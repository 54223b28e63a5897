#include "quant/int8_projection.h"

#include <algorithm>
#include <cmath>

#include "core/dtype.h"
#include "core/error.h"
#include "core/parallel.h"

namespace tritium {

Int8Projection::Int8Projection(Int8Method method, const float* w, int64_t n, int64_t k, const float* bias,
                       Int8ProjectionOptions opt)
    : Int8Projection(quantize_int8_weight(method, w, n, k, opt.outlier_weights),
                 bias ? std::vector<float>(bias, bias + n) : std::vector<float>{}, opt) {}

Int8Projection::Int8Projection(Int8Weight weight, std::vector<float> bias, Int8ProjectionOptions opt)
    : w_(std::move(weight)), bias_(std::move(bias)), opt_(opt) {
  TRITIUM_CHECK(w_.n > 0 && w_.k > 0 && static_cast<int64_t>(w_.q.size()) == w_.n * w_.k,
                "Int8Projection: weight codes do not match the shape [{}, {}]", w_.n, w_.k);
  TRITIUM_CHECK(bias_.empty() || static_cast<int64_t>(bias_.size()) == w_.n,
                "Int8Projection: bias has {} values, expected {}", bias_.size(), w_.n);
  TRITIUM_CHECK(opt_.outlier_threshold > 0.0f && std::isfinite(opt_.outlier_threshold),
                "Int8Projection: outlier_threshold {} must be a positive finite number", opt_.outlier_threshold);
  TRITIUM_CHECK(w_.method != Int8Method::kLlmInt8 || opt_.outlier_weights != OutlierWeights::kFp16Copy ||
                    static_cast<int64_t>(w_.f16.size()) == w_.n * w_.k,
                "Int8Projection: llm.int8 with an fp16 weight copy needs Int8Weight::f16 [N, K]");
  if (w_.row_sum.size() != static_cast<size_t>(w_.n)) {
    w_.row_sum.resize(static_cast<size_t>(w_.n));
    int8_row_sums(w_.q.data(), w_.n, w_.k, w_.row_sum.data());
  }
}

void Int8Projection::forward(const float* x, int64_t M, float* y, std::span<const int64_t> row_begin,
                         Int8ForwardInfo* info) const {
  const int64_t N = w_.n, K = w_.k;
  TRITIUM_CHECK(M >= 0, "Int8Projection::forward: negative row count {}", M);
  if (info) info->outlier_columns.clear();
  if (M == 0) return;
  // Requests as [begin, end) row ranges.
  std::vector<std::pair<int64_t, int64_t>> groups;
  if (row_begin.empty()) {
    groups.emplace_back(0, M);
  } else {
    TRITIUM_CHECK(row_begin[0] == 0, "Int8Projection::forward: row_begin[0] must be 0, got {}", row_begin[0]);
    for (size_t g = 0; g < row_begin.size(); ++g) {
      const int64_t b = row_begin[g], e = g + 1 < row_begin.size() ? row_begin[g + 1] : M;
      TRITIUM_CHECK(b < e && e <= M, "Int8Projection::forward: row_begin[{}]={} does not start a non-empty request within M={}",
                    g, b, M);
      groups.emplace_back(b, e);
    }
  }
  for (int64_t i = 0; i < M * K; ++i) {
    TRITIUM_CHECK(std::isfinite(x[i]), "Int8Projection::forward: input x[{}, {}] = {} is not finite", i / K, i % K, x[i]);
  }
  const Int8Method method = w_.method;

  if (method == Int8Method::kWeightOnly) {
    gemm_f32s8_f32(x, w_.q.data(), w_.scale.data(), M, N, K, y, opt_.kernel);
    if (!bias_.empty()) {
      for (int64_t m = 0; m < M; ++m)
        for (int64_t n = 0; n < N; ++n) y[m * N + n] += bias_[n];
    }
    return;
  }

  // 1. Activation quantization (statistics from the float values, per request or per row).
  std::vector<int8_t> qx(static_cast<size_t>(M * K));
  std::vector<float> sx(static_cast<size_t>(M));
  std::vector<int32_t> zx(static_cast<size_t>(M), 0), sum_qx(static_cast<size_t>(M), 0);
  std::vector<std::vector<int32_t>> outliers(groups.size());
  for (size_t g = 0; g < groups.size(); ++g) {
    const auto [b, e] = groups[g];
    switch (method) {
      case Int8Method::kAbsmax:
      case Int8Method::kRowwise: {
        float amax = 0.0f;
        for (int64_t i = b * K; i < e * K; ++i) amax = std::max(amax, std::fabs(x[i]));
        const float inv = absmax_inv_scale(amax);
        for (int64_t i = b * K; i < e * K; ++i) qx[i] = quantize_s8(x[i], inv);
        for (int64_t m = b; m < e; ++m) sx[m] = absmax_scale(amax);
        break;
      }
      case Int8Method::kZeropoint: {
        float lo = x[b * K], hi = x[b * K];
        for (int64_t i = b * K; i < e * K; ++i) {
          lo = std::min(lo, x[i]);
          hi = std::max(hi, x[i]);
        }
        const ZeroPointParams p = zeropoint_params(lo, hi);
        for (int64_t m = b; m < e; ++m) {
          int32_t s = 0;
          for (int64_t c = 0; c < K; ++c) s += (qx[m * K + c] = quantize_zeropoint_s8(x[m * K + c], p));
          sum_qx[m] = s;
          sx[m] = p.scale;
          zx[m] = p.zero;
        }
        break;
      }
      case Int8Method::kVectorwise: {
        for (int64_t m = b; m < e; ++m) {
          const float* xr = x + m * K;
          float amax = 0.0f;
          for (int64_t c = 0; c < K; ++c) amax = std::max(amax, std::fabs(xr[c]));
          const float inv = absmax_inv_scale(amax);
          for (int64_t c = 0; c < K; ++c) qx[m * K + c] = quantize_s8(xr[c], inv);
          sx[m] = absmax_scale(amax);
        }
        break;
      }
      case Int8Method::kLlmInt8: {
        const float alpha = opt_.outlier_threshold;
        std::vector<char> is_out(static_cast<size_t>(K), 0);
        for (int64_t m = b; m < e; ++m)
          for (int64_t c = 0; c < K; ++c)
            if (std::fabs(x[m * K + c]) >= alpha) is_out[c] = 1;
        for (int64_t c = 0; c < K; ++c)
          if (is_out[c]) outliers[g].push_back(static_cast<int32_t>(c));
        for (int64_t m = b; m < e; ++m) {
          const float* xr = x + m * K;
          float amax = 0.0f;
          for (int64_t c = 0; c < K; ++c)
            if (!is_out[c]) amax = std::max(amax, std::fabs(xr[c]));
          const float inv = absmax_inv_scale(amax);
          for (int64_t c = 0; c < K; ++c) qx[m * K + c] = is_out[c] ? int8_t{0} : quantize_s8(xr[c], inv);
          sx[m] = absmax_scale(amax);
        }
        break;
      }
      case Int8Method::kWeightOnly: break;  // handled above
    }
  }

  // 2. Exact integer product.
  std::vector<int32_t> acc(static_cast<size_t>(M * N));
  gemm_s8s8_s32(qx.data(), w_.q.data(), w_.row_sum.data(), M, N, K, acc.data(), opt_.kernel);

  // 3. Dequantization: the only float step on the integer result.
  const bool zp = method == Int8Method::kZeropoint;
  const int64_t zw = w_.zero;
  parallel_for(M, 4, [&](int64_t m0, int64_t m1) {
    for (int64_t m = m0; m < m1; ++m) {
      for (int64_t n = 0; n < N; ++n) {
        const float s = sx[m] * w_.row_scale(n);
        if (zp) {
          const int64_t v = static_cast<int64_t>(acc[m * N + n]) - zw * sum_qx[m] -
                            static_cast<int64_t>(zx[m]) * w_.row_sum[n] + K * static_cast<int64_t>(zx[m]) * zw;
          y[m * N + n] = static_cast<float>(v) * s;
        } else {
          y[m * N + n] = static_cast<float>(acc[m * N + n]) * s;
        }
      }
    }
  });

  // 4. LLM.int8(): outlier columns in 16-bit weights, fp32 accumulation, ascending column order.
  if (method == Int8Method::kLlmInt8) {
    const bool f16 = opt_.outlier_weights == OutlierWeights::kFp16Copy;
    for (size_t g = 0; g < groups.size(); ++g) {
      const std::vector<int32_t>& cols = outliers[g];
      if (cols.empty()) continue;
      const int64_t nc = static_cast<int64_t>(cols.size());
      std::vector<float> wcol(static_cast<size_t>(nc * N));  // [|O|, N] gathered weight columns
      for (int64_t j = 0; j < nc; ++j) {
        for (int64_t n = 0; n < N; ++n) {
          const int64_t i = n * K + cols[j];
          wcol[j * N + n] = f16 ? f16_to_f32(w_.f16[i]) : static_cast<float>(w_.q[i]) * w_.scale[n];
        }
      }
      const int64_t b = groups[g].first, e = groups[g].second;
      parallel_for(e - b, 1, [&](int64_t r0, int64_t r1) {
        std::vector<float> part(static_cast<size_t>(N));
        for (int64_t m = b + r0; m < b + r1; ++m) {
          std::fill(part.begin(), part.end(), 0.0f);
          for (int64_t j = 0; j < nc; ++j) {
            const float xv = x[m * K + cols[j]];
            const float* wc = wcol.data() + j * N;
            for (int64_t n = 0; n < N; ++n) part[n] += xv * wc[n];
          }
          for (int64_t n = 0; n < N; ++n) y[m * N + n] += part[n];
        }
      });
    }
  }

  // 5. Bias.
  if (!bias_.empty()) {
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) y[m * N + n] += bias_[n];
  }
  if (info) info->outlier_columns = std::move(outliers);
}

}  // namespace tritium
