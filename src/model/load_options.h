// tritium model: the options of loading a model (which storage each weight gets), shared by every weight source
// and the builder.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "formats/ternary_format.h"

namespace tritium {

struct LoadOptions {
  /// Storage format for ternary projections (BitNet checkpoints are repacked at load time).
  TernaryFormat ternary_format = TernaryFormat::kInt8;
  /// Post-training quantization of the projections of a 16/32-bit model (Llama, Qwen2), applied at load:
  /// "" (none), int8-absmax, int8-zeropoint, int8-rowwise, int8-vectorwise, llm-int8, int8-weight-only,
  /// ternary-absmean, ternary-absmean-g128, ternary-threshold. Embeddings, norms and lm_head stay in float.
  std::string quant;
  /// LLM.int8() outlier threshold alpha.
  float outlier_threshold = 6.0f;
  /// ternary-threshold: |w| > t -> sign(w); t <= 0 picks TWN's 0.7 * mean|w| per tensor.
  float ternary_threshold = 0.0f;
  /// Output head (lm_head) storage (model/lm_head.h): "" or "f32" (float32; a tied head shares a float32
  /// embedding table, what the GPU backend uploads), "bf16" (as stored, read in place; a tied head shares the
  /// embedding's bf16 table; the same results as f32), "int8" (per-row absmax int8 weights, per-token int8
  /// activations: LLM.int8() vector-wise), "q6" (src/formats/q6_rows.h), "q4" (src/formats/q4_rows.h), "auto"
  /// (the head as stored: bf16 when stored in bf16, else f32). Unless the head is a tied
  /// f32 one, a bf16 embedding table stays in the mapped file and a lookup widens one row.
  std::string lm_head;
  /// For tritium models (`tritium convert` output): repack ternary weights into ternary_format even when the
  /// file stores another format. When false, a tritium model keeps its stored format (no repacking).
  bool ternary_format_explicit = false;
  /// 16/32-bit projections that are exactly ternary times a scale per tensor (TriLM) or per row and group of 128
  /// inputs (Ternary Bonsai's unpacked checkpoints, GGUF Q2_0) are held packed in ternary_format and run on the
  /// ternary kernels (activations quantized per token to int8, as BitNet), a 16-bit output head likewise
  /// (quant/ternary_detect.h); with lm_head "" or "auto", an output head of that form too. false keeps them as
  /// stored (the reference's own arithmetic).
  bool detect_ternary = true;
  /// Called after each decoder layer is built: (layers done, total layers). For progress bars.
  std::function<void(int, int)> progress;
};

/// The quantization methods LoadOptions::quant accepts.
const std::vector<std::string>& quant_method_names();

}  // namespace tritium
