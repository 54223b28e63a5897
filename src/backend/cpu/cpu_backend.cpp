#include "backend/cpu/cpu_backend.h"

#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/parallel.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/ops.h"

namespace tritium {

CpuBackend::CpuBackend(std::shared_ptr<const Transformer> model, std::shared_ptr<Communicator> comm)
    : Backend(std::move(model)), comm_(std::move(comm)) {
  if (const TensorParallelPlan* plan = model_->tp_plan()) {
    TRITIUM_CHECK(comm_, "CPU backend: a tensor-parallel shard needs a communicator");
    TRITIUM_CHECK(comm_->rank() == plan->rank && comm_->world() == plan->world,
                  "CPU backend: communicator rank {}/{} differs from the plan's {}/{}", comm_->rank(), comm_->world(),
                  plan->rank, plan->world);
  }
}

void CpuBackend::attention(const BatchChunk& c, int layer, const float* q, KvCache& cache, float* out) const {
  const ModelConfig& cfg = model_->config();
  const int64_t T = static_cast<int64_t>(c.tokens.size());
  const int64_t ctx = c.start_pos + T;
  const size_t n = static_cast<size_t>(ctx * cfg.kv_dim());
  // The gathered context, in per-thread scratch (decode rows run this on the pool's threads); gather writes every
  // element read.
  thread_local Scratch<float> kbuf, vbuf;
  float* k = kbuf.get(n);
  float* v = vbuf.get(n);
  cache.gather(layer, c.block_table.data(), ctx, k, v);
  cpu::attention_causal(q, k, v, out, T, c.start_pos, cfg.num_heads, cfg.num_kv_heads, cfg.head_dim);
}

void CpuBackend::forward(std::span<const BatchChunk> batch, KvCache& cache, std::vector<float>& logits) {
  const Transformer& m = *model_;
  const ModelConfig& c = m.config();
  const int64_t Hd = c.hidden_size, I = c.intermediate_size, V = c.vocab_size;
  const int64_t qd = c.q_dim(), kvd = c.kv_dim();
  const BatchShape shape = validate_batch(c, batch, cache);
  const int64_t M = shape.tokens, out_rows = shape.logit_rows;
  const TensorParallelPlan* tp = m.tp_plan();
  const std::vector<LayerWeights>& layers = m.layers();
  const std::vector<float>& inv_freq = m.rope_inv_freq();
  const Linear* head = &m.lm_head();
  // Embedding lookup (one row widened from the table as held).
  float* x = ws_.x.get(static_cast<size_t>(M * Hd));
  {
    // Tensor parallel: vocabulary-parallel lookup (a rank fills only the tokens of its vocabulary slice, zeros
    // elsewhere, and the all-reduce sums the ranks' rows; exactly one rank contributes to each row).
    const Range voc = tp ? split_range(V, tp->world, tp->rank) : Range{0, V};
    if (tp) std::memset(x, 0, sizeof(float) * static_cast<size_t>(M * Hd));
    int64_t r = 0;
    for (const auto& ch : batch)
      for (int32_t tok : ch.tokens) {
        if (tok >= voc.begin && tok < voc.end)
          m.embed().row(tok, x + r * Hd);
        ++r;
      }
    if (tp) comm_->all_reduce_sum(x, M * Hd);
  }
  // RoPE tables per row.
  const int half = c.head_dim / 2;
  float* cosv = ws_.cos.get(static_cast<size_t>(M * half));
  float* sinv = ws_.sin.get(static_cast<size_t>(M * half));
  {
    int64_t r = 0;
    for (const auto& ch : batch)
      for (size_t t = 0; t < ch.tokens.size(); ++t, ++r) {
        const float pos = static_cast<float>(ch.start_pos + static_cast<int64_t>(t));
        for (int i = 0; i < half; ++i) {
          const float ang = pos * inv_freq[i];  // float32 product, as HF
          cosv[r * half + i] = static_cast<float>(std::cos(static_cast<double>(ang)));
          sinv[r * half + i] = static_cast<float>(std::sin(static_cast<double>(ang)));
        }
      }
  }

  // Statistic segments (backend.h): formats whose statistics span rows compute them per segment.
  const std::vector<int64_t> row_begin = segment_row_begins(batch);

  float* h = ws_.h.get(static_cast<size_t>(M * Hd));
  float* qkv = ws_.qkv.get(static_cast<size_t>(M * (qd + 2 * kvd)));
  float* q = ws_.q.get(static_cast<size_t>(M * qd));
  float* attn = ws_.attn.get(static_cast<size_t>(M * qd));
  float* gu = ws_.gu.get(static_cast<size_t>(M * 2 * I));
  float* act = ws_.act.get(static_cast<size_t>(M * I));
  float* proj = ws_.proj.get(static_cast<size_t>(M * Hd));

  // proj = lin(sub_norm(in)) for o and down (the sub-norm is BitNet's). Tensor parallel: gather mode all-gathers
  // the rank's columns of `in` first (o / down replicated); row-parallel mode all-reduces the partial sums of the
  // rank's K slice.
  auto project_in = [&](int l, const char* name, const Linear& lin, const std::vector<float>& sub_norm, float* in,
                        int64_t k, const std::vector<int64_t>* cols, int64_t k_full) {
    if (tp && tp->gather_mode) {
      float* full_in = ws_.full_in.get(static_cast<size_t>(M * k_full));  // the all-gathered input of o / down
      all_gather_columns(*comm_, in, M, *cols, full_in);
      in = full_in;
      k = k_full;
    }
    if (c.sub_norms) cpu::rms_norm(in, sub_norm.data(), in, M, k, c.rms_norm_eps);
    observe(l, name, in, M, k);
    lin.forward(in, M, proj, row_begin);
    if (tp && !tp->gather_mode) comm_->all_reduce_sum(proj, M * Hd);
  };

  for (int l = 0; l < c.num_layers; ++l) {
    const LayerWeights& L = layers[l];
    // --- attention block
    cpu::rms_norm(x, L.input_norm.data(), h, M, Hd, c.rms_norm_eps);
    observe(l, "qkv", h, M, Hd);
    L.qkv->forward(h, M, qkv, row_begin);
    const int64_t qkv_w = qd + 2 * kvd;
    if (c.qk_norm) {  // Qwen3: RMSNorm of each head of q and of k, before RoPE
      cpu::head_rms_norm(qkv, M, qkv_w, c.num_heads, c.head_dim, L.q_norm.data(), c.rms_norm_eps);
      cpu::head_rms_norm(qkv + qd, M, qkv_w, c.num_kv_heads, c.head_dim, L.k_norm.data(), c.rms_norm_eps);
    }
    int64_t r = 0;
    for (const auto& ch : batch) {
      for (size_t t = 0; t < ch.tokens.size(); ++t, ++r) {
        float* row = qkv + r * qkv_w;
        cpu::rope_apply(row, c.num_heads, c.head_dim, &cosv[r * half], &sinv[r * half]);
        cpu::rope_apply(row + qd, c.num_kv_heads, c.head_dim, &cosv[r * half], &sinv[r * half]);
        std::memcpy(q + r * qd, row, sizeof(float) * qd);
        cache.write(l, ch.block_table.data(), ch.start_pos + static_cast<int64_t>(t), row + qd, row + qd + kvd);
      }
    }
    if (static_cast<int64_t>(batch.size()) == M && M > 1) {
      // Decode rows only: one row's gather and attention per task, the rows spread over the threads (inside a
      // task the attention's own parallel_for runs inline). A chunk of several tokens keeps the threads for
      // its heads and tokens instead.
      parallel_for(M, 1, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) attention(batch[i], l, q + i * qd, cache, attn + i * qd);
      });
    } else {
      r = 0;
      for (const auto& ch : batch) {
        attention(ch, l, q + r * qd, cache, attn + r * qd);
        r += static_cast<int64_t>(ch.tokens.size());
      }
    }
    project_in(l, "o", *L.o, L.attn_sub_norm, attn, qd, tp ? &tp->q_cols : nullptr, tp ? tp->q_dim_full : 0);
    cpu::add_inplace(x, proj, M * Hd);

    // --- MLP block
    cpu::rms_norm(x, L.post_attn_norm.data(), h, M, Hd, c.rms_norm_eps);
    observe(l, "gate_up", h, M, Hd);
    L.gate_up->forward(h, M, gu, row_begin);
    for (int64_t m = 0; m < M; ++m) {
      const float* g = gu + m * 2 * I;
      if (c.hidden_act == Activation::kRelu2) cpu::relu2_mul(g, g + I, act + m * I, I);
      else cpu::silu_mul(g, g + I, act + m * I, I);
    }
    project_in(l, "down", *L.down, L.ffn_sub_norm, act, I, tp ? &tp->i_cols : nullptr,
               tp ? tp->inter_full : 0);
    cpu::add_inplace(x, proj, M * Hd);
  }

  // Final norm on the rows that need logits, then lm_head.
  float* sel = ws_.sel.get(static_cast<size_t>(out_rows * Hd));
  {
    int64_t r = 0, o = 0;
    for (const auto& ch : batch) {
      const int64_t T = static_cast<int64_t>(ch.tokens.size());
      if (ch.all_logits) {
        std::memcpy(sel + o * Hd, x + r * Hd, sizeof(float) * T * Hd);
        o += T;
      } else {
        std::memcpy(sel + o * Hd, x + (r + T - 1) * Hd, sizeof(float) * Hd);
        o += 1;
      }
      r += T;
    }
  }
  cpu::rms_norm(sel, m.final_norm().data(), sel, out_rows, Hd, c.rms_norm_eps);
  logits.resize(static_cast<size_t>(out_rows * V));
  std::vector<int64_t> out_begin;
  {
    int64_t o = 0;
    for (const auto& ch : batch) {
      out_begin.push_back(o);
      o += ch.all_logits ? static_cast<int64_t>(ch.tokens.size()) : 1;
    }
  }
  if (!tp) {
    head->forward(sel, out_rows, logits.data(), out_begin);
    return;
  }
  // Vocabulary-parallel lm_head: the rank's rows, then all-gather.
  std::vector<float> part(static_cast<size_t>(out_rows * head->out_features()));
  head->forward(sel, out_rows, part.data(), out_begin);
  all_gather_columns(*comm_, part.data(), out_rows, tp->v_rows, logits.data());
}

}  // namespace tritium
