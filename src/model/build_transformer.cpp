#include "model/build_transformer.h"

#include <optional>

#include "core/error.h"
#include "core/heap.h"
#include "core/mapped_file.h"
#include "model/arch.h"
#include "model/lm_head.h"
#include "model/projections.h"

namespace tritium {

std::unique_ptr<Transformer> build_transformer(ModelConfig c, const WeightSource& ws, const LoadOptions& opts) {
  if (!opts.quant.empty() && c.bitnet_quant)
    fail("{}: --quant {} applies to 16/32-bit models; this BitNet model is already ternary", c.model_dir, opts.quant);
  const int64_t H = c.hidden_size, V = c.vocab_size;
  std::vector<LayerWeights> layers(c.num_layers);
  auto norm = [&](const std::optional<NormTensor>& n) { return n ? ws.vec(n->name, n->size) : std::vector<float>{}; };
  auto projection = [&](const ProjectionTensors& pt) -> std::unique_ptr<Linear> {
    if (!c.bitnet_quant) return fuse_float(ws, pt.parts, pt.in, pt.bias, opts);
    std::vector<TernaryWeight> parts;
    for (const auto& [prefix, rows] : pt.parts) parts.push_back(ws.ternary(prefix, rows, pt.in));
    return fuse_ternary(std::move(parts), pt.in, opts.ternary_format);
  };
  for (int l = 0; l < c.num_layers; ++l) {
    const LayerTensors t = layer_tensors(c, l);
    LayerWeights& L = layers[l];
    L.input_norm = ws.vec(t.input_norm.name, t.input_norm.size);
    L.post_attn_norm = ws.vec(t.post_attn_norm.name, t.post_attn_norm.size);
    L.attn_sub_norm = norm(t.attn_sub_norm);
    L.ffn_sub_norm = norm(t.ffn_sub_norm);
    L.q_norm = norm(t.q_norm);
    L.k_norm = norm(t.k_norm);
    L.qkv = projection(t.qkv);
    L.o = projection(t.o);
    L.gate_up = projection(t.gate_up);
    L.down = projection(t.down);
    release_free_heap();  // the layer's load temporaries: resident memory stays at the weights'
    if (opts.progress) opts.progress(l + 1, c.num_layers);
  }
  std::vector<float> final_norm = ws.vec(kFinalNormName, H);
  const bool has_head = ws.has(kLmHeadName);
  const bool tied = c.tie_word_embeddings || !has_head;
  if (!c.tie_word_embeddings && !has_head) fail("{}: weight 'lm_head.weight' is missing", c.model_dir);
  Embedding embed = ws.table(kEmbedTokensName, V, H);
  Embedding head_table = tied ? embed : ws.table(kLmHeadName, V, H);
  const std::string head_kind = resolve_lm_head_kind(opts.lm_head, head_table.is_bf16());
  // The default head of a model whose head is ternary (Ternary Bonsai) runs on the ternary kernels.
  std::unique_ptr<Linear> lm_head;
  if ((opts.lm_head.empty() || opts.lm_head == "auto") && opts.detect_ternary)
    lm_head = ternary_head_from_table(head_table, opts.ternary_format);
  if (!lm_head && tied && head_kind == "f32" && embed.is_bf16()) {
    // A float32 head tied to the embedding: both read one float32 table.
    const bool mapped = !embed.owner();
    const Embedding widened = Embedding::f32(embed.f32_table(), V, H);
    if (mapped) release_mapped_pages(embed.bf16_data(), embed.bytes());
    embed = widened;
    head_table = embed;
  }
  if (!lm_head) lm_head = make_head_from_table(head_table, head_kind);
  release_free_heap();
  return std::make_unique<Transformer>(std::move(c), std::move(embed), std::move(layers), std::move(final_norm),
                                       std::move(lm_head));
}

}  // namespace tritium
