// tritium kernels/cpu: W1.58A8 kernels (int8 activations x ternary weights, int32 accumulation) over the
// tiled packed formats i2 / tq1 / bitcos (layouts in src/quant/ternary_{i2,tq1,bitcos}.h).
//
// All three formats share one geometry: tiles of 16 consecutive output rows; K padded to Kp, a multiple
// of 128; a "k-step" is 4 consecutive k. The SIMD paths decode weights to codes c = w + 1 in {0, 1, 2}
// (unsigned bytes, so VNNI vpdpbusd / AVX2 maddubs can multiply them with signed int8 x) and subtract
// sum_k x afterwards: sum_k w x = sum_k c x - sum_k x, exact in int32. Decoded codes of one k-step form
// 64 bytes, byte 4 r + j = row r of the tile, k = 4 s + j (the "lane order").
//
// Paths: ternary_ref.cpp (scalar oracle: decodes every weight with plain scalar code and sums w * x
// directly, no padding tricks), ternary_avx2.cpp, ternary_avx512.cpp; chosen by kernels/cpu/dispatch.h.
// GEMV (M = 1) streams the packed weights once; GEMM (M >= 2) decodes a whole tile once into a code
// buffer and reuses it for every block of rows of x (register-blocked microkernel).
#pragma once

#include <cstdint>

#include "quant/ternary_format.h"

namespace tritium::cpu {

inline constexpr int64_t kTileRows = 16;   ///< output rows per tile
inline constexpr int64_t kStepK = 4;       ///< k per k-step (one 32-bit lane of vpdpbusd)
inline constexpr int64_t kStepBytes = 64;  ///< bytes of decoded codes per k-step of one tile

/// Read-only view of a packed i2 / tq1 / bitcos matrix (owned by the format object).
struct TernaryView {
  TernaryFormat fmt = TernaryFormat::kI2;
  int64_t n = 0, k = 0;         ///< logical shape [N, K]
  int64_t tiles = 0;            ///< ceil(N / 16)
  int64_t kp = 0;               ///< K padded up to a multiple of 128
  const uint8_t* codes = nullptr;          ///< i2 / tq1 payload
  const uint64_t* bitmap = nullptr;        ///< bitcos presence words [tiles][kp / 4]
  const uint64_t* signs = nullptr;         ///< bitcos sign words (+ one trailing zero word)
  const uint64_t* sign_offsets = nullptr;  ///< bitcos [tiles + 1] bit offset of each tile's signs
  int64_t groups() const { return kp / kTernaryGroupK; }
  int64_t steps() const { return kp / kStepK; }
};

/// acc [M, N] = x [M, K] * W^T exactly (see PackedTernary::gemm_i32), on the active path.
void ternary_gemm_i32(const TernaryView& w, const int8_t* x, int64_t M, int32_t* acc);
/// Group-scaled GEMM (see PackedTernary::gemm_f32), on the active path.
void ternary_gemm_f32(const TernaryView& w, const int8_t* x, const float* act_scale, int64_t M,
                      const float* group_scales, float* y);
/// Scalar decode of tile t to ternary values int8 [16][kp] (rows past N and k past K are 0).
void ternary_decode_tile_ref(const TernaryView& w, int64_t t, int8_t* out);

namespace detail {
/// Scalar oracle paths.
void ternary_gemm_i32_ref(const TernaryView& w, const int8_t* x, int64_t M, int32_t* acc);
void ternary_gemm_f32_ref(const TernaryView& w, const int8_t* x, const float* act_scale, int64_t M,
                          const float* group_scales, float* y);

/// The per-ISA pieces (AVX2 in ternary_avx2.cpp, AVX-512 in ternary_avx512.cpp).
struct TernaryIsa {
  /// GEMV of tile t over groups [g0, g1): out[r] = sum_k c[r, k] * xp[k] (codes, k in those groups).
  /// xp: the activation row padded with zeros to kp. sign_pos: bitcos running sign bit position
  /// (start at sign_offsets[t]; advanced), ignored by other formats.
  void (*gemv_tile)(const TernaryView& w, int64_t t, int64_t g0, int64_t g1, const int8_t* xp,
                    uint64_t* sign_pos, int32_t* out);
  /// Decodes tile t to codes in lane order: out [kp / 4][64] bytes.
  void (*decode_tile)(const TernaryView& w, int64_t t, uint8_t* out);
  /// Microkernel: out[i * 16 + r] = sum over k-steps s in [s0, s1) of codes[s][4r + j] * x_i[4s + j],
  /// for rows x_i = xp + i * ldx, i < mb, mb <= max_mb.
  void (*mm_codes)(const uint8_t* codes, int64_t s0, int64_t s1, const int8_t* xp, int64_t ldx, int mb,
                   int32_t* out);
  int max_mb;
};
const TernaryIsa& ternary_isa_avx2();
const TernaryIsa& ternary_isa_avx512();
}  // namespace detail

}  // namespace tritium::cpu
