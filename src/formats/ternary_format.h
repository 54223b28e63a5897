// tritium formats: packed ternary weight matrices (values in {-1, 0, +1}) and their formats.
//
// A PackedTernary holds W [N, K] (N = out features = rows, K = in features), row-major in the
// logical sense, in one of several storage formats. Every format is lossless for ternary values.
// The kernels (src/kernels/cpu) multiply int8 activations with it and accumulate in int32
// (W1.58A8, as BitNet b1.58 computes).
//
// Formats (exact byte layouts in each class's header):
//  - int8   (ternary_int8.h):   one int8 per weight, 8 bits/weight, the naive baseline.
//  - i2     (ternary_i2.h):     2-bit codes w+1, 16-row tiles, 2 bits/weight.
//  - tq1    (ternary_tq1.h):    base-3, 5 trits per byte (+ a 2-bit tail per 128), 1.625 bits/weight.
//  - bitcos (ternary_bitcos.h): BITCOS presence bitmap + compacted sign bits, 2 - z bits/weight
//                               (z = zero density) plus a per-tile sign offset.
// i2 / tq1 / bitcos pad N up to a multiple of 16 rows and K up to a multiple of 128 with zero
// weights; bytes() and the bits/weight reports count that padding.
//
// Results are exact integers: for a given row m of x, every kernel path (ref / AVX2 / AVX-512),
// every thread count and every M give bit-identical outputs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
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

/// Group size along K of the per-group scales of the group-scaled GEMM (kernels/cpu/ternary_kernels.h) (and of the tq1 blocking).
inline constexpr int64_t kTernaryGroupK = 128;

/// One raw storage buffer of a packed format, as a model file writer saves it.
struct TernaryBuffer {
  std::string_view name;           ///< e.g. "codes", "bitmap", "signs", "sign_offsets"
  std::span<const uint8_t> bytes;  ///< little-endian, exactly the in-memory layout
};

/// A ternary matrix in some packed format.
class PackedTernary {
 public:
  virtual ~PackedTernary() = default;
  virtual TernaryFormat format() const = 0;
  int64_t rows() const { return n_; }  ///< N (output features)
  int64_t cols() const { return k_; }  ///< K (input features)
  /// Bytes of packed weight storage including any index/offset/padding overhead (not scales).
  virtual size_t bytes() const = 0;
  /// Writes the ternary values as int8 [N, K] row-major.
  virtual void unpack(int8_t* out) const = 0;
  /// The raw storage buffers (views into this object), in the order from_buffers expects them.
  virtual std::vector<TernaryBuffer> buffers() const = 0;
  /// Number of groups of 128 along K (the second dimension of the group-scaled GEMM's group_scales).
  int64_t groups() const { return (k_ + kTernaryGroupK - 1) / kTernaryGroupK; }

 protected:
  PackedTernary(int64_t n, int64_t k) : n_(n), k_(k) {}
  int64_t n_, k_;
};

/// Packs ternary values w (int8 [N, K], each in {-1, 0, 1}) into the given format.
/// Throws tritium::Error if a value is outside {-1, 0, 1} or n, k <= 0.
std::unique_ptr<PackedTernary> pack_ternary(TernaryFormat f, const int8_t* w, int64_t n, int64_t k);

/// Rebuilds a packed matrix from raw buffers saved from buffers() (same order, same sizes), with no
/// repacking. copy = false borrows the bytes (e.g. an mmap'ed file that must outlive the object;
/// buffers that are not 64-bit aligned where the format needs it are copied anyway); copy = true
/// copies them. Throws tritium::Error on a wrong buffer count or size, or inconsistent bitcos offsets.
std::unique_ptr<PackedTernary> ternary_from_buffers(TernaryFormat f, int64_t n, int64_t k,
                                                    std::span<const std::span<const uint8_t>> buffers,
                                                    bool copy = false);

}  // namespace tritium
