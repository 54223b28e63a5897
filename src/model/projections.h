// tritium model: the storage of each projection, decided at load. A decoder layer's projections are fused (q|k|v,
// gate|up; o and down alone), each part keeping its own scale (a segment) or its own per-group scales.
//  - A ternary model's parts (BitNet, Falcon3-1.58bit) are packed in LoadOptions::ternary_format.
//  - A 16/32-bit model's parts are, in this order: ternary codes a source stores (GGUF Q2_0:
//    WeightSource::stored_ternary) or float values that are exactly ternary times a scale per tensor or per row and
//    group of 128 (quant/ternary_detect.h; LoadOptions::detect_ternary) -> packed ternary; with LoadOptions::quant
//    set -> that post-training quantization, each part with its own statistics; else float32.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "formats/ternary_format.h"
#include "model/linear.h"
#include "model/load_options.h"
#include "model/weight_source.h"

namespace tritium {

/// The parts [rows_i, in] of a ternary model's projection stacked into one packed TernaryLinear [sum rows_i, in]:
/// a scale per part, or per-group scales for every part when any part has them.
std::unique_ptr<Linear> fuse_ternary(std::vector<TernaryWeight> parts, int64_t in, TernaryFormat fmt);

/// The parts of a 16/32-bit model's projection, read from `ws` by name prefix ("model.layers.0.self_attn.q_proj"
/// with its row count), with their biases ("<prefix>.bias") when `bias`, in the storage the rules above pick.
/// Throws tritium::Error from `ws` (a missing tensor, a wrong shape) or for an unknown quantization method.
std::unique_ptr<Linear> fuse_float(const WeightSource& ws, const std::vector<std::pair<std::string, int64_t>>& parts,
                                   int64_t in, bool bias, const LoadOptions& o);

}  // namespace tritium
