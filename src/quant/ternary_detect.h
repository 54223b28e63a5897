// tritium quant: recognising 16/32-bit weights that already are ternary times a scale, as TriLM's unpacked
// checkpoints (SpectraSuite TriLM_*_Unpacked: {-s, 0, +s} per tensor) and Ternary Bonsai's unpacked ones ((c - 1) * d
// with one d per row and group of 128 inputs) store them, so that they are held packed (2 bits per weight) and run
// on the ternary kernels instead of as 16-bit matrices.
#pragma once

#include <cstdint>
#include <optional>

#include "quant/ternary_ptq.h"

namespace tritium {

/// W [n, k] (float32, row-major, the widened 16-bit values) as ternary codes times scales, when it is exactly that:
///  - one scale per tensor: every non-zero |w| equal (group_size 0, scales [1]);
///  - else one scale per row and group of `group` columns (the last group of a row may be shorter): within each
///    such group every non-zero |w| equal (group_size = group, scales [n, ceil(k / group)]; a group of zeros gets
///    scale 0).
/// Exact: q * scale reproduces every w bit for bit. Returns nullopt when neither holds, when W is all zeros, or
/// when a value is not finite. Throws tritium::Error on n, k or group <= 0.
std::optional<TernaryQuant> detect_ternary(const float* w, int64_t n, int64_t k, int64_t group = 128);

/// The last step of a detection, given codes and per-group scales (group_size > 0; a group of zeros has scale 0):
/// nullopt when every scale is 0 (an all-zero tensor); one scale per tensor (group_size 0, scales [1]) when every
/// non-zero scale is the same value; else q as it is.
std::optional<TernaryQuant> settle_group_scales(TernaryQuant q);

}  // namespace tritium
