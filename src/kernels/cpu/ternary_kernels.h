// tritium kernels/cpu: W1.58A8 kernels (int8 activations x ternary weights, int32 accumulation) over the
// tiled packed formats i2 / tq1 / bitcos (layouts in src/formats/ternary_{i2,tq1,bitcos}.h).
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
#include <vector>

#include "formats/ternary_format.h"
#include "formats/ternary_view.h"

namespace tritium::cpu {

/// Integer GEMM over any packed format: acc[m * N + n] = sum_k x[m * K + k] * W[n, k] for m < M.
/// x: int8 [M, K] row-major (any value in [-128, 127]); acc: int32 [M, N]. Multithreaded over output rows
/// (tritium::parallel_for); M = 1 uses the streaming GEMV kernel, M >= 2 the blocked GEMM kernel. The path
/// (ref / avx2 / avx512) follows kernels/cpu/dispatch.h; the int8 format runs a plain loop.
void ternary_gemm_i32(const PackedTernary& w, const int8_t* x, int64_t M, int32_t* acc);
/// GEMM with per-group weight scales (Ternary Bonsai, post-training-quantized models), any packed format:
///   y[m, n] = act_scale[m] * sum_g scale(n, g) * (sum_{k in group g} x[m, k] * W[n, k])
/// with G = ceil(K / 128) groups of 128 along K (the last may be shorter). The inner sums are exact
/// int32; the float sum over g runs in increasing g from 0.0f (a multiplication then an addition per group, never
/// fused), so results are identical on every path.
/// x: int8 [M, K]; act_scale: float [M] (dequantization multiplier of row m, x ~ x_q * act_scale);
/// group_scales: the multipliers (W ~ scale * ternary) tile-major, as tile_group_scales lays them out:
/// scale(n, g) = group_scales[((n / 16) * G + g) * 16 + n % 16], so the 16 rows of a tile read one contiguous
/// vector per group; y: float [M, N].
void ternary_gemm_f32(const PackedTernary& w, const int8_t* x, const float* act_scale, int64_t M,
                      const float* group_scales, float* y);
/// The same over a tiled format's view, on the active path.
void ternary_gemm_i32(const TernaryView& w, const int8_t* x, int64_t M, int32_t* acc);
void ternary_gemm_f32(const TernaryView& w, const int8_t* x, const float* act_scale, int64_t M,
                      const float* group_scales, float* y);
/// The same with the group scales stored as IEEE fp16 bit patterns (Q2_0's own precision: half the memory of
/// float32), same tile-major layout; each scale is widened exactly to float32, so y is identical to the float32
/// call over the widened scales.
void ternary_gemm_f32(const PackedTernary& w, const int8_t* x, const float* act_scale, int64_t M,
                      const uint16_t* group_scales_f16, float* y);
void ternary_gemm_f32(const TernaryView& w, const int8_t* x, const float* act_scale, int64_t M,
                      const uint16_t* group_scales_f16, float* y);

/// Row-major scales [N, G] (scale(n, g) at n * G + g) in the tile-major layout of ternary_gemm_f32:
/// [ceil(N / 16)][G][16], rows past N zero.
std::vector<float> tile_group_scales(const float* row_major, int64_t n, int64_t groups);
/// The inverse: the tile-major scales of an [n, groups] matrix back in row-major order.
std::vector<float> row_group_scales(const float* tile_major, int64_t n, int64_t groups);

namespace detail {
/// Scalar oracle paths.
void ternary_gemm_i32_ref(const TernaryView& w, const int8_t* x, int64_t M, int32_t* acc);
void ternary_gemm_f32_ref(const TernaryView& w, const int8_t* x, const float* act_scale, int64_t M,
                          const float* group_scales, float* y);

/// GEMV of tile t over groups [g0, g1): out[r] = sum_k c[r, k] * xp[k] (codes, k in those groups).
/// xp: the activation row padded with zeros to kp. sign_pos: bitcos running sign bit position
/// (start at sign_offsets[t]; advanced), ignored by other formats.
using GemvTileFn = void (*)(const TernaryView& w, int64_t t, int64_t g0, int64_t g1, const int8_t* xp,
                            uint64_t* sign_pos, int32_t* out);
/// Decodes tile t to codes in lane order: out [kp / 4][64] bytes.
using DecodeTileFn = void (*)(const TernaryView& w, int64_t t, uint8_t* out);

/// The per-ISA pieces (AVX2 in ternary_avx2.cpp, AVX-512 in ternary_avx512.cpp): one GEMV and one decoder per
/// tiled format, and the GEMM microkernel; the dispatch by format is here, once for every ISA.
struct TernaryIsa {
  GemvTileFn gemv_i2, gemv_tq1, gemv_bitcos;
  DecodeTileFn decode_i2, decode_tq1, decode_bitcos;
  /// Microkernel: out[i * 16 + r] = sum over k-steps s in [s0, s1) of codes[s][4r + j] * x_i[4s + j],
  /// for rows x_i = xp + i * ldx, i < mb, mb <= max_mb.
  void (*mm_codes)(const uint8_t* codes, int64_t s0, int64_t s1, const int8_t* xp, int64_t ldx, int mb,
                   int32_t* out);
  int max_mb;
  /// The same microkernel over rows of x packed by pack_x_blocks: row i's k-step s at xk + 4 * (s * max_mb + i),
  /// so that one pointer walks a block's k-steps in 4 * max_mb-byte lines (the row-major layout keeps max_mb
  /// strided streams and one address register per row). Null where the ISA takes the row-major layout only.
  void (*mm_packed)(const uint8_t* codes, int64_t s0, int64_t s1, const int8_t* xk, int mb, int32_t* out) = nullptr;
  /// Few-row GEMM straight from the i2 codes of tile t (no decoded tile): out[i * 16 + r] for rows
  /// x_i = xp + i * ldx, i < mb, 2 <= mb <= max_rows_i2. Null (max_rows_i2 0) where the ISA has none.
  void (*rows_i2)(const TernaryView& w, int64_t t, const int8_t* xp, int64_t ldx, int mb, int32_t* out) = nullptr;
  int max_rows_i2 = 0;
  /// mm_codes may read x rows up to mb rounded up to this (the caller pads x with zero rows).
  int pad_rows = 1;
  /// One group's step of the group-scaled GEMM for rows i < mb of a tile's result out [mb][16] (int32 sums of
  /// codes over the group's k): s[i * 16 + r] += gs[r] * float(out[i * 16 + r] - sumx[i * G]) for r < 16
  /// (gs: the tile's 16 scales of the group), a multiplication then an addition (never fused), so every lane
  /// computes what the scalar oracle does.
  void (*group_accumulate)(const int32_t* out, int mb, const int32_t* sumx, int64_t G, const float* gs,
                           float* s) = nullptr;
  /// The group-scaled GEMV of i2 tile t (one row of x): s[r] = sum over groups g of gs[g * 16 + r] *
  /// float(sum_k c[r, k] * xp[k] - sumx[g]), in group_accumulate's arithmetic (gs: the tile's G x 16 scales).
  /// Null where the ISA has none (the caller then runs gemv_tile and group_accumulate per group).
  void (*gemv_i2_grouped)(const TernaryView& w, int64_t t, const int8_t* xp, const int32_t* sumx, const float* gs,
                          float* s) = nullptr;
  /// The whole group-scaled GEMM of one decoded tile (codes as mm_codes reads them) for rows x_i = xp + i * ldx,
  /// i < mb <= max_mb: for every group g in increasing order, s[i * 16 + r] += gs[g * 16 + r] * float(sum over
  /// the group's k of codes * x_i - sumx[i * G + g]), in group_accumulate's arithmetic (gs: the tile's G x 16
  /// scales). Null where the ISA has none (the caller then runs mm_codes and group_accumulate per group).
  void (*mm_grouped)(const uint8_t* codes, int64_t G, const int8_t* xp, int64_t ldx, int mb, const int32_t* sumx,
                     const float* gs, float* s) = nullptr;
  /// f[i] = the fp16 bit pattern h[i] as float32 (exact), i < n. Null: the scalar conversion.
  void (*widen_f16)(const uint16_t* h, int64_t n, float* f) = nullptr;

  void gemv_tile(const TernaryView& w, int64_t t, int64_t g0, int64_t g1, const int8_t* xp, uint64_t* sign_pos,
                 int32_t* out) const {
    switch (w.fmt) {
      case TernaryFormat::kI2: return gemv_i2(w, t, g0, g1, xp, sign_pos, out);
      case TernaryFormat::kTQ1: return gemv_tq1(w, t, g0, g1, xp, sign_pos, out);
      case TernaryFormat::kBitcos: return gemv_bitcos(w, t, g0, g1, xp, sign_pos, out);
      case TernaryFormat::kInt8: break;
    }
  }
  void decode_tile(const TernaryView& w, int64_t t, uint8_t* out) const {
    switch (w.fmt) {
      case TernaryFormat::kI2: return decode_i2(w, t, out);
      case TernaryFormat::kTQ1: return decode_tq1(w, t, out);
      case TernaryFormat::kBitcos: return decode_bitcos(w, t, out);
      case TernaryFormat::kInt8: break;
    }
  }
};
const TernaryIsa& ternary_isa_avx2();
const TernaryIsa& ternary_isa_avx512();
/// AVX-512 with the GEMM microkernel on AMX tiles (ternary_amx.cpp); max_mb 64.
const TernaryIsa& ternary_isa_amx();
}  // namespace detail

}  // namespace tritium::cpu
