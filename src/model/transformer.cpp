#include "model/transformer.h"

#include <cmath>

#include "core/error.h"

namespace tritium {

Transformer::Transformer(ModelConfig config, std::shared_ptr<const std::vector<float>> embed,
                         std::vector<LayerWeights> layers, std::vector<float> final_norm, std::unique_ptr<Linear> lm_head)
    : Transformer(config, Embedding::f32(std::move(embed), config.vocab_size, config.hidden_size), std::move(layers),
                  std::move(final_norm), std::move(lm_head)) {}

Transformer::Transformer(ModelConfig config, Embedding embed, std::vector<LayerWeights> layers,
                         std::vector<float> final_norm, std::unique_ptr<Linear> lm_head)
    : config_(std::move(config)),
      embed_(std::move(embed)),
      layers_(std::move(layers)),
      final_norm_(std::move(final_norm)),
      lm_head_(std::move(lm_head)) {
  // A table borrowed from a mapped file that the head does not read serves lookups only: read from the file a row
  // at a time, it is not resident beside the head's own copy.
  if (!head_shares_embedding()) embed_.read_rows_from_file();
  const int half = config_.head_dim / 2;
  inv_freq_.resize(half);
  for (int i = 0; i < half; ++i) {
    // HF: 1 / (base ** (arange(0, dim, 2).float() / dim)) in float32.
    const float expo = static_cast<float>(2 * i) / static_cast<float>(config_.head_dim);
    inv_freq_[i] = 1.0f / static_cast<float>(std::pow(config_.rope_theta, static_cast<double>(expo)));
  }
}

size_t Transformer::body_bytes_per_token() const {
  size_t b = 0;
  for (const auto& l : layers_)
    b += l.qkv->weight_bytes() + l.o->weight_bytes() + l.gate_up->weight_bytes() + l.down->weight_bytes();
  return b;
}

size_t Transformer::weight_bytes_per_token() const { return body_bytes_per_token() + lm_head_->weight_bytes(); }

bool Transformer::head_shares_embedding() const {
  if (const auto* b = dynamic_cast<const Bf16Linear*>(lm_head_.get())) return b->data() == embed_.bf16_data();
  if (const auto* f = dynamic_cast<const FloatLinear*>(lm_head_.get()))
    return embed_.is_f32() && &f->weight() == embed_.f32_table().get();
  return false;
}

size_t Transformer::weight_bytes() const {
  size_t b = weight_bytes_per_token() + embed_.bytes() + final_norm_.size() * sizeof(float);
  if (head_shares_embedding()) b -= lm_head_->weight_bytes();
  for (const auto& l : layers_)
    b += (l.input_norm.size() + l.post_attn_norm.size() + l.attn_sub_norm.size() + l.ffn_sub_norm.size() +
          l.q_norm.size() + l.k_norm.size()) * 4;
  return b;
}

}  // namespace tritium
