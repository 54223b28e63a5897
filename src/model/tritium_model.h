// tritium model: the tritium model file — a converted / quantized model saved so that it loads with no repacking
// and no re-quantization.
//
// A tritium model is a folder like a Hugging Face one: config.json, tokenizer files, generation_config.json and
// chat template files copied from the source, plus model.safetensors written by write_tritium_model. The
// safetensors container is standard (any safetensors reader opens it); its __metadata__ has
//   "tritium.version": "1"
//   "tritium.layout":  JSON (a string) describing every linear layer, see docs/formats.md:
//     {"version": 1, "source": ..., "weights": ..., "quant": ..., "lm_head": ...,
//      "linears": {"model.layers.0.qkv": {"kind": "ternary", "format": "i2", "rows": N, "cols": K,
//                  "buffers": ["codes"], "segment_rows": [...] | "group_scales": true, "bias": bool}, ...}}
// Tensors, for linear layer L (model.layers.<i>.{qkv,o,gate_up,down} fused as in LayerWeights, and lm_head):
//   kind "ternary": L.<buffer> U8 [bytes] (PackedTernary::buffers(), exactly the in-memory layout, 8-byte aligned
//                   so they are used in place from the mapping), L.segment_scales F32 [S] or L.group_scales F32
//                   [N, ceil(K/128)], optional L.bias F32 [N];
//   kind "int8":    L.q I8 [N, K], L.scale F32 [1] or [N], optional L.f16 F16 [N, K] (LLM.int8() fp16 copy),
//                   optional L.bias; "method", "zero", "outlier_threshold", "outlier_weights" in the layout;
//   kind "q4":      L.codes U8 [N, K/2], L.scales F16 [N, K/32] (src/formats/q4_rows.h);
//   kind "q6":      L.codes U8 [N, 3K/4], L.scales F16 [N, K/32] (src/formats/q6_rows.h);
//   kind "float":   L.weight BF16 or F32 [N, K] (BF16 when every value is exactly a bf16), optional L.bias;
//   kind "tied":    lm_head only: the embedding table is the head (float32).
// Every tensor starts at a multiple of 64 bytes of the data section (U8 padding tensors "tritium.pad.<i>" fill the
// gaps, since safetensors readers reject holes).
// Embeddings and norms keep their Hugging Face names (model.embed_tokens.weight, model.layers.<i>.
// input_layernorm.weight, ..., model.norm.weight), BF16 when exact, else F32.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "io/model_config.h"
#include "io/safetensors.h"
#include "model/load_options.h"
#include "model/transformer.h"

namespace tritium {

/// Metadata key whose presence marks a tritium model file.
inline constexpr const char* kTritiumLayoutKey = "tritium.layout";

/// What write_tritium_model records about the conversion (informational, in the layout JSON).
struct TritiumWriteInfo {
  std::string source;   ///< source folder
  std::string weights;  ///< ternary format name, or ""
  std::string quant;    ///< PTQ method, or ""
  std::string lm_head;  ///< head storage, or ""
};

/// Writes `model` (as loaded, with its layers in their storage) as a tritium model folder `out_dir` (created if
/// needed): model.safetensors + every non-weight file of `src_dir` (config, tokenizer, templates) copied, or, when
/// `src_dir` is a GGUF file, the files its metadata stands for (model/gguf_tokenizer.h write_gguf_side_files).
/// progress(done, total) is called per written layer. Throws tritium::Error on I/O failure, when out_dir is
/// src_dir, or for a layer type it cannot store.
void write_tritium_model(const Transformer& model, const std::string& src_dir, const std::string& out_dir,
                         const TritiumWriteInfo& info, const std::function<void(int, int)>& progress = {});

/// True when the store's first file carries tritium layout metadata.
bool is_tritium_model(const WeightStore& ws);

/// Builds a Transformer from a tritium model file. Ternary buffers are borrowed from the mapping (which the
/// returned model keeps alive), int8 / q6 / q4 codes are copied as stored; nothing is re-quantized. LoadOptions:
/// quant must be empty (the file is already quantized); lm_head may quantize a float head further but not
/// change a quantized one; ternary_format is used only when ternary_format_explicit (then weights are repacked).
/// Throws tritium::Error naming the file and layer when the metadata is malformed or lies (unknown kind or
/// format, wrong shapes, buffer sizes that do not match the format).
std::unique_ptr<Transformer> load_tritium_model(ModelConfig config, std::shared_ptr<const WeightStore> ws,
                                                const LoadOptions& opts);

}  // namespace tritium
