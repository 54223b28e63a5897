// tritium quant: packed ternary weight matrices (values in {-1, 0, +1}) and their formats.
//
// A PackedTernary holds W [N, K] (N = out features = rows, K = in features), row-major in the
// logical sense, in one of several storage formats. Every format is lossless for ternary values.
// The kernels (src/kernels/cpu) multiply int8 activations with it and accumulate in int32
// (W1.58A8, as BitNet b1.58 computes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace tritium {

/// Storage formats of ternary weights.
///  - kInt8: one int8 per weight (naive baseline, 8 bits/weight).
///  - kI2, kTQ1, kBitcos: see their headers (2-bit, base-3, bitmap + compacted signs).
enum class TernaryFormat { kInt8, kI2, kTQ1, kBitcos };

std::string_view ternary_format_name(TernaryFormat f);
/// Parses "int8" / "i2" / "tq1" / "bitcos"; throws tritium::Error otherwise.
TernaryFormat parse_ternary_format(std::string_view s);

/// A ternary matrix in some packed format.
class PackedTernary {
 public:
  virtual ~PackedTernary() = default;
  virtual TernaryFormat format() const = 0;
  int64_t rows() const { return n_; }  ///< N (output features)
  int64_t cols() const { return k_; }  ///< K (input features)
  /// Bytes of packed weight storage including any index/offset overhead (not scales).
  virtual size_t bytes() const = 0;
  /// Integer GEMM: acc[m * N + n] = sum_k x[m * K + k] * W[n, k] for m < M.
  /// x: int8 [M, K] row-major; acc: int32 [M, N]. Multithreaded over output rows.
  virtual void gemm_i32(const int8_t* x, int64_t M, int32_t* acc) const = 0;
  /// Writes the ternary values as int8 [N, K] row-major.
  virtual void unpack(int8_t* out) const = 0;

 protected:
  PackedTernary(int64_t n, int64_t k) : n_(n), k_(k) {}
  int64_t n_, k_;
};

/// Packs ternary values w (int8 [N, K], each in {-1, 0, 1}) into the given format.
/// Throws tritium::Error if a value is outside {-1, 0, 1}.
std::unique_ptr<PackedTernary> pack_ternary(TernaryFormat f, const int8_t* w, int64_t n, int64_t k);

}  // namespace tritium
