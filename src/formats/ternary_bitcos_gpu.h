// tritium formats: the GPU BITCOS ternary layout (presence bitmap + compacted signs, as the CPU format in
// formats/ternary_bitcos.h, BITCOS paper section II-B) laid out for a warp-per-row GEMV. Host-side packing only
// (no CUDA needed); the kernel is ternary_bitcos_gemv in kernels.h.
//
// W [n, k] with values in {-1, 0, +1}; K is padded with zero weights to kp = 64 * ceil(k / 64) (the same kp as
// the tc2 layout, so one int8 activation buffer xq [M, kp] serves both); G = kp / 32 groups of 32 weights per row.
// Three uint32 buffers (little-endian):
//  - "masks" [n][G]: bit b of word (r, g) is set iff W[r, 32 g + b] != 0 (the presence bitmap, 1 bit/weight).
//  - "row_offsets" [n + 1]: the word in "signs" where row r's sign stream starts; entry n = the words used.
//  - "signs" [row_offsets[n] + 1]: row r's stream holds one bit per non-zero weight of the row, in k order,
//    1 = negative; bit e of the stream is bit e % 32 of word row_offsets[r] + e / 32. Each row starts on a word
//    boundary (unused high bits of its last word are 0); a trailing zero word lets the GEMV read any two-word
//    window that starts inside a stream.
// A warp finds the sign position of group g from the row offset and a warp prefix sum of __popc(mask) of the
// groups before g in the row: no per-group offsets are stored.
// Size: 4 * (n * G + (n + 1) + row_offsets[n] + 1) bytes, i.e. per weight (kp / k) + (non-zeros / (n k)) bits
// plus at most 63 / k (row padding of the signs and the row offset) + 32 / (n k): 2 - z bits/weight plus
// under 64 / k (0.025 bits/weight at k = 2560) for z the zero density and k a multiple of 64.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tritium::cuda {

struct BitcosGpu {
  int64_t n = 0, k = 0, kp = 0, groups = 0;  ///< groups = kp / 32 mask words per row
  std::vector<uint32_t> masks;               ///< [n * groups]
  std::vector<uint32_t> row_offsets;         ///< [n + 1]
  std::vector<uint32_t> signs;               ///< [row_offsets[n] + 1]
  /// Non-zero weights (= sign bits).
  uint64_t nonzeros = 0;
  /// Bytes of the three buffers together (what a GEMV reads).
  size_t bytes() const { return 4 * (masks.size() + row_offsets.size() + signs.size()); }
  /// bytes() * 8 / (n * k).
  double bits_per_weight() const { return 8.0 * static_cast<double>(bytes()) / static_cast<double>(n * k); }
};

/// Packs w (int8 [n, k], values in {-1, 0, 1}) into the GPU BITCOS layout above. Throws tritium::Error on a
/// bad shape, on a value outside {-1, 0, 1}, or when the sign stream would not fit 32-bit word offsets.
BitcosGpu pack_bitcos_gpu(const int8_t* w, int64_t n, int64_t k);

/// Inverse of pack_bitcos_gpu (for tests): int8 [n, k].
std::vector<int8_t> unpack_bitcos_gpu(const BitcosGpu& b);

}  // namespace tritium::cuda
