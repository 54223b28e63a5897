// tritium quant: post-training ternarization of float weights into {-1, 0, +1} codes plus scales,
// ready for pack_ternary (src/formats/ternary_format.h). W [N, K] is row-major (HF Linear.weight).
//
// Rules:
//  - absmean (BitNet b1.58, Ma et al. 2024): s = mean |W| over the tensor,
//    q = clamp(round(W / s), -1, 1), W ~= q * s. round is half-to-even (|W| = s/2 -> 0), like
//    torch.round. s == 0 (all-zero W) gives q = 0, s = 0.
//  - absmean per group: the same with s computed per row over groups of G consecutive columns
//    (G = 128 by default; the last group of a row may be shorter and uses its own count).
//  - threshold (TWN-style): q = sign(w) if |w| > t else 0, one per-tensor scale alpha fitted by least
//    squares. Derivation: E(alpha) = sum_i (w_i - alpha q_i)^2
//      = sum w_i^2 - 2 alpha sum q_i w_i + alpha^2 sum q_i^2;  dE/dalpha = 0 gives
//      alpha* = sum_i q_i w_i / sum_i q_i^2 = (sum_{|w_i| > t} |w_i|) / #{|w_i| > t},
//    (q_i w_i = |w_i| and q_i^2 = 1 on the kept set, 0 elsewhere), a minimum since
//    d2E/dalpha2 = 2 #kept > 0; the residual is E(alpha*) = sum w^2 - (sum_kept |w|)^2 / #kept.
//    Nothing kept: alpha = 0.
#pragma once

#include <cstdint>
#include <vector>

namespace tritium {

/// Ternary codes and their scales.
struct TernaryQuant {
  int64_t n = 0, k = 0;
  std::vector<int8_t> q;       ///< int8 [N, K] row-major, each in {-1, 0, 1}
  int64_t group_size = 0;      ///< 0: one per-tensor scale; else scales per row per group of columns
  std::vector<float> scales;   ///< [1] or [N, ceil(K / group_size)] row-major
  /// Scale that multiplies code (row, col).
  float scale_at(int64_t row, int64_t col) const {
    return group_size == 0 ? scales[0] : scales[row * groups_per_row() + col / group_size];
  }
  int64_t groups_per_row() const { return group_size == 0 ? 1 : (k + group_size - 1) / group_size; }
  /// W ~= q * scale as float32 [N, K].
  std::vector<float> dequantize() const;
};

/// BitNet b1.58 absmean rule, one scale per tensor. Throws tritium::Error on a bad shape or a
/// non-finite weight.
TernaryQuant ternary_absmean(const float* w, int64_t n, int64_t k);
/// absmean per row per group of `group` columns (scales [N, ceil(K / group)]). Throws on group <= 0.
TernaryQuant ternary_absmean_grouped(const float* w, int64_t n, int64_t k, int64_t group = 128);
/// Fixed-threshold rule: |w| > t -> sign(w), else 0; per-tensor least-squares scale (see above).
/// Throws on t < 0.
TernaryQuant ternary_threshold(const float* w, int64_t n, int64_t k, float t);

/// The least-squares scale for codes sign(w) * [|w| > t]: mean |w| over the kept entries (0 if none).
float ternary_ls_scale(const float* w, int64_t count, float t);
/// TWN's heuristic threshold 0.7 * mean |w| (Li et al. 2016, "Ternary Weight Networks").
float ternary_twn_threshold(const float* w, int64_t count);
/// The threshold whose least-squares fit has the smallest squared error over all thresholds:
/// keeping the j largest |w| gives error sum w^2 - S_j^2 / j (S_j = sum of those |w|), so the best j
/// maximizes S_j^2 / j. Returns a t that keeps exactly those j entries (the (j+1)-th largest |w|;
/// 0 when all are kept). Ties in |w| are kept or dropped together.
float ternary_optimal_threshold(const float* w, int64_t count);

}  // namespace tritium
