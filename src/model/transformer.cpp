#include "model/transformer.h"

#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/parallel.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/ops.h"
#include "parallel/communicator.h"

namespace tritium {

Transformer::Transformer(ModelConfig config, std::shared_ptr<const std::vector<float>> embed, std::vector<LayerWeights> layers,
                         std::vector<float> final_norm, std::unique_ptr<Linear> lm_head)
    : config_(std::move(config)),
      embed_(std::move(embed)),
      layers_(std::move(layers)),
      final_norm_(std::move(final_norm)),
      lm_head_(std::move(lm_head)) {
  const int half = config_.head_dim / 2;
  inv_freq_.resize(half);
  for (int i = 0; i < half; ++i) {
    // HF: 1 / (base ** (arange(0, dim, 2).float() / dim)) in float32.
    const float expo = static_cast<float>(2 * i) / static_cast<float>(config_.head_dim);
    inv_freq_[i] = 1.0f / static_cast<float>(std::pow(config_.rope_theta, static_cast<double>(expo)));
  }
}

void Transformer::set_tensor_parallel(TensorParallelPlan plan, std::shared_ptr<Communicator> comm) {
  TRITIUM_CHECK(!comm || (comm->rank() == plan.rank && comm->world() == plan.world),
                "set_tensor_parallel: communicator rank {}/{} differs from the plan's {}/{}", comm->rank(),
                comm->world(), plan.rank, plan.world);
  tp_ = std::make_shared<const TensorParallelPlan>(std::move(plan));
  comm_ = std::move(comm);
}

size_t Transformer::weight_bytes_per_token() const {
  size_t b = lm_head_->weight_bytes();
  for (const auto& l : layers_)
    b += l.qkv->weight_bytes() + l.o->weight_bytes() + l.gate_up->weight_bytes() + l.down->weight_bytes();
  return b;
}

size_t Transformer::weight_bytes() const {
  size_t b = weight_bytes_per_token() + (embed_->size() + final_norm_.size()) * sizeof(float);
  if (config_.tie_word_embeddings) b -= lm_head_->weight_bytes();
  for (const auto& l : layers_)
    b += (l.input_norm.size() + l.post_attn_norm.size() + l.attn_sub_norm.size() + l.ffn_sub_norm.size()) * 4;
  return b;
}

void Transformer::attention(const BatchChunk& c, int layer, const float* q, KvCache& cache, float* out) const {
  const int64_t T = static_cast<int64_t>(c.tokens.size());
  const int64_t ctx = c.start_pos + T;
  const int64_t kvd = config_.kv_dim();
  std::vector<float> kbuf(static_cast<size_t>(ctx * kvd)), vbuf(static_cast<size_t>(ctx * kvd));
  cache.gather(layer, c.block_table.data(), ctx, kbuf.data(), vbuf.data());
  cpu::attention_causal(q, kbuf.data(), vbuf.data(), out, T, c.start_pos, config_.num_heads, config_.num_kv_heads,
                        config_.head_dim);
}

void Transformer::forward(std::span<const BatchChunk> batch, KvCache& cache, std::vector<float>& logits) const {
  const ModelConfig& c = config_;
  const int64_t Hd = c.hidden_size, I = c.intermediate_size, V = c.vocab_size;
  const int64_t qd = c.q_dim(), kvd = c.kv_dim();
  int64_t M = 0, out_rows = 0;
  for (const auto& ch : batch) {
    TRITIUM_CHECK(!ch.tokens.empty(), "forward: empty chunk");
    const int64_t end = ch.start_pos + static_cast<int64_t>(ch.tokens.size());
    TRITIUM_CHECK(end <= c.max_position_embeddings, "forward: position {} exceeds the model context of {} tokens",
                  end - 1, c.max_position_embeddings);
    TRITIUM_CHECK(static_cast<int64_t>(ch.block_table.size()) * cache.block_size() >= end,
                  "forward: block table covers {} positions, need {}", ch.block_table.size() * cache.block_size(),
                  end);
    M += static_cast<int64_t>(ch.tokens.size());
    out_rows += ch.all_logits ? static_cast<int64_t>(ch.tokens.size()) : 1;
  }
  if (backend_) {
    for (const auto& ch : batch)
      for (int32_t tok : ch.tokens)
        TRITIUM_CHECK(tok >= 0 && tok < V, "forward: token id {} outside the vocabulary of {}", tok, V);
    backend_->forward(batch, cache, logits);
    return;
  }
  TRITIUM_CHECK(!tp_ || comm_, "forward: tensor-parallel shard without a communicator (CPU forward)");
  // Embedding lookup.
  std::vector<float> x(static_cast<size_t>(M * Hd));
  {
    // Tensor parallel: vocabulary-parallel lookup (a rank fills only the tokens of its vocabulary slice, zeros
    // elsewhere, and the all-reduce sums the ranks' rows; exactly one rank contributes to each row).
    const Range voc = tp_ ? split_range(V, tp_->world, tp_->rank) : Range{0, V};
    int64_t r = 0;
    for (const auto& ch : batch)
      for (int32_t tok : ch.tokens) {
        TRITIUM_CHECK(tok >= 0 && tok < V, "forward: token id {} outside the vocabulary of {}", tok, V);
        if (tok >= voc.begin && tok < voc.end)
          std::memcpy(&x[r * Hd], embed_->data() + static_cast<size_t>(tok) * Hd, sizeof(float) * Hd);
        ++r;
      }
    if (tp_) comm_->all_reduce_sum(x.data(), M * Hd);
  }
  // RoPE tables per row.
  const int half = c.head_dim / 2;
  std::vector<float> cosv(static_cast<size_t>(M * half)), sinv(static_cast<size_t>(M * half));
  {
    int64_t r = 0;
    for (const auto& ch : batch)
      for (size_t t = 0; t < ch.tokens.size(); ++t, ++r) {
        const float pos = static_cast<float>(ch.start_pos + static_cast<int64_t>(t));
        for (int i = 0; i < half; ++i) {
          const float ang = pos * inv_freq_[i];  // float32 product, as HF
          cosv[r * half + i] = static_cast<float>(std::cos(static_cast<double>(ang)));
          sinv[r * half + i] = static_cast<float>(std::sin(static_cast<double>(ang)));
        }
      }
  }

  // First row of each chunk: formats whose statistics span rows compute them per request.
  std::vector<int64_t> row_begin;
  {
    int64_t r0 = 0;
    for (const auto& ch : batch) {
      row_begin.push_back(r0);
      r0 += static_cast<int64_t>(ch.tokens.size());
    }
  }
  std::vector<float> h(static_cast<size_t>(M * Hd)), qkv(static_cast<size_t>(M * (qd + 2 * kvd)));
  std::vector<float> q(static_cast<size_t>(M * qd)), attn(static_cast<size_t>(M * qd));
  std::vector<float> gu(static_cast<size_t>(M * 2 * I)), act(static_cast<size_t>(M * I));
  std::vector<float> proj(static_cast<size_t>(M * Hd));
  std::vector<float> full_in;  // tensor parallel, gather mode: the all-gathered input of o / down

  for (int l = 0; l < c.num_layers; ++l) {
    const LayerWeights& L = layers_[l];
    // --- attention block
    cpu::rms_norm(x.data(), L.input_norm.data(), h.data(), M, Hd, c.rms_norm_eps);
    observe(l, "qkv", h.data(), M, Hd);
    L.qkv->forward(h.data(), M, qkv.data(), row_begin);
    const int64_t qkv_w = qd + 2 * kvd;
    int64_t r = 0;
    for (const auto& ch : batch) {
      for (size_t t = 0; t < ch.tokens.size(); ++t, ++r) {
        float* row = &qkv[r * qkv_w];
        cpu::rope_apply(row, c.num_heads, c.head_dim, &cosv[r * half], &sinv[r * half]);
        cpu::rope_apply(row + qd, c.num_kv_heads, c.head_dim, &cosv[r * half], &sinv[r * half]);
        std::memcpy(&q[r * qd], row, sizeof(float) * qd);
        cache.write(l, ch.block_table.data(), ch.start_pos + static_cast<int64_t>(t), row + qd, row + qd + kvd);
      }
    }
    r = 0;
    for (const auto& ch : batch) {
      attention(ch, l, &q[r * qd], cache, &attn[r * qd]);
      r += static_cast<int64_t>(ch.tokens.size());
    }
    {
      // Tensor parallel: gather mode all-gathers the heads' outputs (o replicated), row-parallel mode all-reduces
      // the partial sums of the rank's K slice.
      float* o_in = attn.data();
      int64_t o_k = qd;
      if (tp_ && tp_->gather_mode) {
        full_in.resize(static_cast<size_t>(M * tp_->q_dim_full));
        all_gather_columns(*comm_, attn.data(), M, tp_->q_cols, full_in.data());
        o_in = full_in.data();
        o_k = tp_->q_dim_full;
      }
      if (c.sub_norms) cpu::rms_norm(o_in, L.attn_sub_norm.data(), o_in, M, o_k, c.rms_norm_eps);
      observe(l, "o", o_in, M, o_k);
      L.o->forward(o_in, M, proj.data(), row_begin);
      if (tp_ && !tp_->gather_mode) comm_->all_reduce_sum(proj.data(), M * Hd);
    }
    cpu::add_inplace(x.data(), proj.data(), M * Hd);

    // --- MLP block
    cpu::rms_norm(x.data(), L.post_attn_norm.data(), h.data(), M, Hd, c.rms_norm_eps);
    observe(l, "gate_up", h.data(), M, Hd);
    L.gate_up->forward(h.data(), M, gu.data(), row_begin);
    for (int64_t m = 0; m < M; ++m) {
      const float* g = &gu[m * 2 * I];
      if (c.hidden_act == Activation::kRelu2) cpu::relu2_mul(g, g + I, &act[m * I], I);
      else cpu::silu_mul(g, g + I, &act[m * I], I);
    }
    {
      float* d_in = act.data();
      int64_t d_k = I;
      if (tp_ && tp_->gather_mode) {
        full_in.resize(static_cast<size_t>(M * tp_->inter_full));
        all_gather_columns(*comm_, act.data(), M, tp_->i_cols, full_in.data());
        d_in = full_in.data();
        d_k = tp_->inter_full;
      }
      if (c.sub_norms) cpu::rms_norm(d_in, L.ffn_sub_norm.data(), d_in, M, d_k, c.rms_norm_eps);
      observe(l, "down", d_in, M, d_k);
      L.down->forward(d_in, M, proj.data(), row_begin);
      if (tp_ && !tp_->gather_mode) comm_->all_reduce_sum(proj.data(), M * Hd);
    }
    cpu::add_inplace(x.data(), proj.data(), M * Hd);
  }

  // Final norm on the rows that need logits, then lm_head.
  std::vector<float> sel(static_cast<size_t>(out_rows * Hd));
  {
    int64_t r = 0, o = 0;
    for (const auto& ch : batch) {
      const int64_t T = static_cast<int64_t>(ch.tokens.size());
      if (ch.all_logits) {
        std::memcpy(&sel[o * Hd], &x[r * Hd], sizeof(float) * T * Hd);
        o += T;
      } else {
        std::memcpy(&sel[o * Hd], &x[(r + T - 1) * Hd], sizeof(float) * Hd);
        o += 1;
      }
      r += T;
    }
  }
  cpu::rms_norm(sel.data(), final_norm_.data(), sel.data(), out_rows, Hd, c.rms_norm_eps);
  logits.resize(static_cast<size_t>(out_rows * V));
  std::vector<int64_t> out_begin;
  {
    int64_t o = 0;
    for (const auto& ch : batch) {
      out_begin.push_back(o);
      o += ch.all_logits ? static_cast<int64_t>(ch.tokens.size()) : 1;
    }
  }
  if (!tp_) {
    lm_head_->forward(sel.data(), out_rows, logits.data(), out_begin);
    return;
  }
  // Vocabulary-parallel lm_head: the rank's rows, then all-gather.
  std::vector<float> part(static_cast<size_t>(out_rows * lm_head_->out_features()));
  lm_head_->forward(sel.data(), out_rows, part.data(), out_begin);
  all_gather_columns(*comm_, part.data(), out_rows, tp_->v_rows, logits.data());
}

}  // namespace tritium
