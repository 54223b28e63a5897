// tritium model: the output head (lm_head) in each storage format, built from the embedding table (tied) or the
// checkpoint's own head weights, and the default format.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/embedding.h"
#include "model/linear.h"

namespace tritium {

/// The lm_head storage names LoadOptions::lm_head accepts: "auto", "f32", "bf16", "int8", "q6", "q4".
const std::vector<std::string>& lm_head_kind_names();

/// The concrete format of a requested one: "" -> "f32"; "auto" -> the head as the checkpoint stores it ("bf16" when
/// stored in bf16, else "f32"), so that the default output equals the model's reference implementation; any other
/// name is returned unchanged. The smaller heads (int8, q6, q4) change some greedy tokens at near-ties and are
/// opt-in only (bench/RESULTS.md, "Output head formats").
std::string resolve_lm_head_kind(const std::string& requested, bool stored_bf16);

/// Builds an output head from float32 weights w [V, H] in the given storage ("f32", "bf16", "int8", "q6", "q4").
/// Throws tritium::Error on an unknown kind or a shape the kind cannot hold (q6 and q4 need H % 64 == 0).
std::unique_ptr<Linear> make_head_linear(std::vector<float> w, int64_t vocab, int64_t hidden, const std::string& kind);

/// Builds an output head [t.rows(), t.cols()] from a table without a float32 copy of it: "f32" shares a float32
/// table (or widens a bf16 one into the head's own copy), "bf16" shares a bf16 table (or rounds a float32 one
/// into an owned copy), "int8" (per-row absmax: Int8Method::kVectorwise), "q6" and "q4" quantize it a block of rows
/// at a time, dropping each block's pages from the resident set when the table is borrowed from a mapped file.
/// The result equals make_head_linear over the widened table bit for bit. Throws as make_head_linear.
std::unique_ptr<Linear> make_head_from_table(const Embedding& t, const std::string& kind);

/// The output head as a TernaryLinear (packed in `fmt`, one scale per row and group of 128 inputs) when the table
/// holds exactly ternary values times such scales (quant/ternary_detect.h: Ternary Bonsai's head, stored in 16 bits
/// or as GGUF Q2_0), read a block of rows at a time; nullptr when it does not. Logits then follow the ternary
/// kernels' arithmetic (activations quantized per token to int8 by absmax).
std::unique_ptr<Linear> ternary_head_from_table(const Embedding& t, TernaryFormat fmt);

}  // namespace tritium
