// tritium backend/cuda: the CUDA backend's forward pass — the batch's metadata and attention plan, the layer loop as
// a sequence of kernels on one stream (run_body: captured as a CUDA graph for decode steps, graphs.cpp), and the
// projections (ternary through the tc2 / tcb kernels, float through cuBLAS, int8 through int8_linear.h).
#if TRITIUM_HAVE_CUDA
#include <algorithm>

#include "backend/cuda/cuda_backend_impl.h"
#include "core/env.h"
#include "parallel/nccl_comm.h"

namespace tritium::cuda_detail {

using cuda::check;

void CudaBackend::forward(std::span<const BatchChunk> batch, KvCache& cache, std::vector<float>& logits) {
  const int O = enqueue_forward(batch, cache);
  // Tensor parallel: a bounded wait that aborts the group when a rank died or hangs (NcclComm::wait), before the
  // copy to pageable memory (which would block on a stuck stream).
  if (opts_.tp_comm) opts_.tp_comm->wait(stream_, "the forward's collectives", env::tp_timeout_seconds());
  if (opts_.copy_logits) {
    logits.resize(static_cast<size_t>(O) * c_.vocab_size);
    check(cudaMemcpyAsync(logits.data(), logits_, logits.size() * sizeof(float), cudaMemcpyDeviceToHost, stream_),
          "cudaMemcpyAsync (logits)");
  }
  check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize (forward)");
}

int CudaBackend::enqueue_forward(std::span<const BatchChunk> batch, KvCache& cache) {
  validate_batch(c_, batch, cache);
  check(cudaSetDevice(opts_.device), "cudaSetDevice");
  DevKv& kv = device_kv(cache);
  bt_width_ = static_cast<int>((c_.max_position_embeddings + kv.block_size - 1) / kv.block_size);
  int M = 0, O = 0;
  const int S = static_cast<int>(batch.size());
  bool decode_only = true;
  int64_t max_ctx = 0;
  for (const auto& ch : batch) {
    M += static_cast<int>(ch.tokens.size());
    O += ch.all_logits ? static_cast<int>(ch.tokens.size()) : 1;
    if (ch.tokens.size() != 1 || ch.all_logits) decode_only = false;
    max_ctx = std::max<int64_t>(max_ctx, ch.start_pos + static_cast<int64_t>(ch.tokens.size()));
  }
  ensure_workspace(M, S, O);
  plan_attention(batch, M, S, max_ctx);
  upload_metadata(batch, kv, M, S, O);
  if (decode_only && opts_.graphs) {
    run_graphed(M, S, O, kv);
  } else {
    run_body(M, S, O, kv);
  }
  return O;
}

void CudaBackend::plan_attention(std::span<const BatchChunk> batch, int M, int S, int64_t max_ctx) {
  // Decode rows: the GQA kernel (split over positions by each row's context alone, so a row gets the same bits in
  // any batch), in decode steps fused with RoPE and the KV write, in steps that also prefill after the prefill
  // kernels over the single-token rows; else the per-head kernels, split-K by the batch at long contexts.
  // Flash-style prefill for the prefill chunks when decode rows run the GQA kernel, else when the chunks average at
  // least 16 rows (tiles of 1-2 rows would serialize a long context per block).
  attn_split_ = 1;
  ntiles_ = 0;
  nsingle_ = 0;
  tiles_h_.clear();
  // One sequence at a time (generate, chat): no batch to be invariant to, and the per-head kernels spread a single
  // row over more blocks (bench/CUDA_NOTES.md, "Attention").
  attn_gqa_ = !attn_basic_ && !opts_.single_sequence &&
              cuda::attention_gqa_supported(c_.num_heads, c_.num_kv_heads, c_.head_dim);
  if (attn_basic_) return;
  if (attn_gqa_) {  // the grid's depth: the most chunks of a single-token row (not monotonic in the context)
    for (const auto& ch : batch) {
      if (ch.tokens.size() != 1) continue;
      attn_split_ = std::max(attn_split_, cuda::attention_gqa_chunks(ch.start_pos + 1));
      ++nsingle_;
    }
    if (M == S) nsingle_ = 0;
  }
  if (M == S) {
    if (!attn_gqa_ && max_ctx > kSplitMinContext) attn_split_ = cuda::attention_split_count(M, c_.num_heads);
  } else if ((attn_gqa_ || M >= 16 * S) && cuda::attention_prefill_tile_rows(c_.num_heads, c_.num_kv_heads) > 0) {
    tiles_h_.reserve(2 * static_cast<size_t>(M + S));
    const int tr = cuda::attention_prefill_tile_rows(c_.num_heads, c_.num_kv_heads);
    int r0 = 0;
    for (const auto& ch : batch) {  // rows of one chunk: one sequence, consecutive positions
      const int T = static_cast<int>(ch.tokens.size());
      // With the GQA kernel the single-token rows are its (nsingle_): the tiles cover the prefill chunks only, so a
      // prefill chunk gets the flash kernel beside decode rows as it does alone.
      const bool gqa_row = attn_gqa_ && T == 1;
      for (int t = 0; t < T && !gqa_row; t += tr) {
        tiles_h_.push_back(r0 + t);
        tiles_h_.push_back(std::min(tr, T - t));
      }
      r0 += T;
    }
    ntiles_ = static_cast<int>(tiles_h_.size() / 2);
  }
}

void CudaBackend::upload_metadata(std::span<const BatchChunk> batch, const DevKv& kv, int M, int S, int O) {
  // Layout: tokens [M], positions [M], sequence of each row [M], statistic segment of each row [M] (backend.h),
  // rows that give logits [O], tables [S, W], prefill tiles [ntiles, 2], rows of single-token chunks [nsingle_].
  const size_t need =
      static_cast<size_t>(4 * M + O) + static_cast<size_t>(S) * bt_width_ + tiles_h_.size() + nsingle_;
  if (need > meta_cap_) {
    check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
    clear_graphs();
    if (meta_h_) cudaFreeHost(meta_h_);
    meta_cap_ = std::max(need, meta_cap_ * 2);
    check(cudaMallocHost(reinterpret_cast<void**>(&meta_h_), meta_cap_ * sizeof(int32_t)), "cudaMallocHost");
    meta_d_ = ws_.alloc<int32_t>(meta_cap_);
  }
  int32_t* tok = meta_h_;
  int32_t* pos = tok + M;
  int32_t* seq = pos + M;
  int32_t* seg = seq + M;
  int32_t* out = seg + M;
  int32_t* bt = out + O;
  int r = 0, o = 0, g = -1;
  for (int s = 0; s < S; ++s) {
    const BatchChunk& ch = batch[s];
    const int T = static_cast<int>(ch.tokens.size());
    const int64_t end = ch.start_pos + T;
    const int64_t nb = (end + kv.block_size - 1) / kv.block_size;
    TRITIUM_CHECK(nb <= bt_width_, "CUDA backend: block table wider than the model context");
    int32_t* row = bt + static_cast<size_t>(s) * bt_width_;
    for (int64_t b = 0; b < bt_width_; ++b) {
      const int32_t id = b < nb ? ch.block_table[b] : 0;
      TRITIUM_CHECK(id >= 0 && id < kv.num_blocks, "forward: block id {} outside the KV pool of {} blocks", id,
                    kv.num_blocks);
      row[b] = id;
    }
    for (int t = 0; t < T; ++t, ++r) {
      tok[r] = ch.tokens[t];
      pos[r] = static_cast<int32_t>(ch.start_pos + t);
      seq[r] = s;
      if (starts_segment(ch, t)) ++g;
      seg[r] = g;
      if (ch.all_logits || t == T - 1) out[o++] = r;
    }
  }
  std::copy(tiles_h_.begin(), tiles_h_.end(), bt + static_cast<size_t>(S) * bt_width_);
  if (nsingle_ > 0) {
    int32_t* single = bt + static_cast<size_t>(S) * bt_width_ + tiles_h_.size();
    int row = 0;
    for (const auto& ch : batch) {
      if (ch.tokens.size() == 1) *single++ = row;
      row += static_cast<int>(ch.tokens.size());
    }
  }
  // Views in the device buffer (same layout).
  tok_d_ = meta_d_;
  pos_d_ = tok_d_ + M;
  seq_d_ = pos_d_ + M;
  seg_d_ = seq_d_ + M;
  out_d_ = seg_d_ + M;
  bt_d_ = out_d_ + O;
  tiles_d_ = bt_d_ + static_cast<size_t>(S) * bt_width_;
  single_d_ = tiles_d_ + tiles_h_.size();
  check(cudaMemcpyAsync(meta_d_, meta_h_, need * sizeof(int32_t), cudaMemcpyHostToDevice, stream_),
        "cudaMemcpyAsync (metadata)");
}

void CudaBackend::run_body(int M, int S, int O, const DevKv& kv) {
  const int Hd = c_.hidden_size, I = c_.intermediate_size, qd = c_.q_dim(), kvd = c_.kv_dim();
  const int qkvw = qd + 2 * kvd;
  if (!tp_) {
    if (embed_) cuda::embedding(embed_, tok_d_, M, Hd, x_, stream_);
    else cuda::embedding(embed_stored_, tok_d_, M, Hd, x_, stream_);
  } else {
    cuda::embedding_vocab_slice(embed_, vocab_begin_, vocab_end_, tok_d_, M, Hd, x_, stream_);
    opts_.tp_comm->all_reduce_sum(x_, static_cast<size_t>(M) * Hd, stream_);
  }
  pending_ = {};  // a forward that ended in an error may have left sums pending
  // The fused decode attention reads qkv's pending sums, unless q and k are normalized first (Qwen3).
  defer_qkv_ = M == S && attn_gqa_ && !c_.qk_norm;
  for (int l = 0; l < c_.num_layers; ++l) {
    const DevLayer& L = layers_[l];
    apply(L.qkv, x_, Hd, nullptr, L.in_norm, M, qkv_, qkvw, false);
    if (c_.qk_norm) {  // Qwen3: RMSNorm of each q and k head (the k heads follow the q heads), before RoPE
      flush_pending();
      cuda::head_rms_norm(qkv_, M, qkvw, c_.num_heads, c_.head_dim, L.q_norm, c_.rms_norm_eps, stream_,
                          c_.num_kv_heads, L.k_norm);
    }
    if (M == S && attn_gqa_) {  // decode: one new token per sequence; RoPE + KV write inside the attention kernel
      // The grid depends on the largest context's chunk count only (graph-safe for the positions in between). The
      // qkv projection's int8-GEMM sums, when pending, are read through its epilogue by the kernel itself.
      const bool sums = pending_.acc && pending_.ep.y == qkv_ && pending_.parts == 1;
      if (!sums) flush_pending();
      cuda::attention_decode_gqa(qkv_, qkvw, M, c_.num_heads, c_.num_kv_heads, c_.head_dim, cos_, sin_, pos_d_,
                                 seq_d_, bt_d_, bt_width_, kv.block_size, kv.k(l), kv.v(l), attn_, attn_split_,
                                 attn_part_, attn_cnt_, stream_, kv.format(), 0, 0, sums ? &pending_ : nullptr);
      if (sums) pending_ = {};
    } else if (M == S) {
      flush_pending();
      // attn_split_ > 1 (long contexts): split-K; its grid does not depend on the positions (graph-safe).
      cuda::attention_decode_rope_split(qkv_, qkvw, M, c_.num_heads, c_.num_kv_heads, c_.head_dim, cos_, sin_,
                                        pos_d_, seq_d_, bt_d_, bt_width_, kv.block_size, kv.k(l), kv.v(l), attn_,
                                        attn_split_, attn_part_, attn_cnt_, stream_, kv.format());
    } else {
      flush_pending();
      cuda::rope_kv_write(qkv_, M, c_.num_heads, c_.num_kv_heads, c_.head_dim, cos_, sin_, pos_d_, seq_d_, bt_d_,
                          bt_width_, kv.block_size, kv.k(l), kv.v(l), stream_, kv.format());
      if (ntiles_ > 0) {
        cuda::attention_prefill(qkv_, qkvw, c_.num_heads, c_.num_kv_heads, c_.head_dim, pos_d_, seq_d_, bt_d_,
                                bt_width_, kv.block_size, kv.k(l), kv.v(l), attn_, tiles_d_, ntiles_, stream_,
                                kv.format());
      } else {
        cuda::attention_paged(qkv_, qkvw, M, c_.num_heads, c_.num_kv_heads, c_.head_dim, pos_d_, seq_d_, bt_d_,
                              bt_width_, kv.block_size, kv.k(l), kv.v(l), attn_, stream_, kv.format());
      }
      if (nsingle_ > 0)  // single-token rows: the decode kernel's bits, as in a decode step
        cuda::attention_gqa(qkv_, qkvw, single_d_, nsingle_, c_.num_heads, c_.num_kv_heads, c_.head_dim, pos_d_,
                            seq_d_, bt_d_, bt_width_, kv.block_size, kv.k(l), kv.v(l), attn_, attn_split_,
                            attn_part_, attn_cnt_, stream_, kv.format());
    }
    if (!tp_) {
      apply(L.o, attn_, qd, nullptr, c_.sub_norms ? L.attn_sub : nullptr, M, x_, Hd, true);
    } else if (tp_->gather_mode) {  // o replicated over the all-gathered heads (BitNet: exact)
      gather_cols(attn_, M, tp_->q_cols, full_in_);
      apply(L.o, full_in_, tp_->q_dim_full, nullptr, c_.sub_norms ? L.attn_sub : nullptr, M, x_, Hd, true);
    } else {  // row-parallel: partial sums over the rank's heads, all-reduced
      apply(L.o, attn_, qd, nullptr, nullptr, M, part_, Hd, false);
      opts_.tp_comm->all_reduce_sum(part_, static_cast<size_t>(M) * Hd, stream_);
      cuda::bias_add(part_, nullptr, M, Hd, x_, true, stream_);
    }
    apply(L.gate_up, x_, Hd, nullptr, L.post_norm, M, gu_, 2 * I, false);
    const bool relu2 = c_.hidden_act == Activation::kRelu2;
    if (!tp_ && L.down.kind == DevLinear::kTernary && L.down.k == I) {
      // GLU + ffn_sub_norm + quantization of the down projection's input in one kernel.
      if (pending_.acc && pending_.ep.y == gu_ && pending_rows_ == M) {  // gate_up's sums, pending
        cuda::glu_norm_quant_sums(pending_, M, I, relu2, c_.sub_norms ? L.ffn_sub : nullptr, c_.rms_norm_eps, act_,
                                  xq_, L.down.kp, inv_s_, sumq_, stream_, tcb_planes_for(L.down, M));
        pending_ = {};
      } else {
        cuda::glu_norm_quant(gu_, M, I, relu2, c_.sub_norms ? L.ffn_sub : nullptr, c_.rms_norm_eps, act_, xq_,
                             L.down.kp, inv_s_, sumq_, stream_, tcb_planes_for(L.down, M));
      }
      ternary_quantized(L.down, M, x_, Hd, true, /*defer=*/true);
      continue;
    }
    flush_pending();
    cuda::glu(gu_, M, I, relu2, act_, stream_);
    if (!tp_) {
      apply(L.down, act_, I, nullptr, c_.sub_norms ? L.ffn_sub : nullptr, M, x_, Hd, true);
    } else if (tp_->gather_mode) {
      gather_cols(act_, M, tp_->i_cols, full_in_);
      apply(L.down, full_in_, tp_->inter_full, nullptr, c_.sub_norms ? L.ffn_sub : nullptr, M, x_, Hd, true);
    } else {
      apply(L.down, act_, I, nullptr, nullptr, M, part_, Hd, false);
      opts_.tp_comm->all_reduce_sum(part_, static_cast<size_t>(M) * Hd, stream_);
      cuda::bias_add(part_, nullptr, M, Hd, x_, true, stream_);
    }
  }
  flush_pending();  // the last down projection's sums: the head reads selected rows of x_
  if (!tp_) {
    apply(lm_head_, x_, Hd, out_d_, final_norm_, O, logits_, c_.vocab_size, false);
  } else {  // vocabulary-parallel lm_head
    apply(lm_head_, x_, Hd, out_d_, final_norm_, O, lg_local_, lm_head_.n, false);
    gather_cols(lg_local_, O, tp_->v_rows, logits_);
  }
}

void CudaBackend::apply(const DevLinear& lin, const float* in, int64_t ldin, const int32_t* row_map,
                        const float* norm_w, int rows, float* out, int64_t ldout, bool add) {
  const float eps = c_.rms_norm_eps;
  if (lin.kind == DevLinear::kTernary && pending_.acc && pending_.ep.add && pending_.ep.y == in &&
      pending_.ep.ldy == ldin && !row_map && norm_w && pending_n_ == lin.k && pending_rows_ == rows) {
    // The residual projection before (o, down) left its sums pending: added to the residual stream by the norm.
    cuda::residual_norm_quant(pending_, rows, lin.k, norm_w, eps, xq_, lin.kp, inv_s_, sumq_, stream_,
                              tcb_planes_for(lin, rows));
    pending_ = {};
    ternary_quantized(lin, rows, out, ldout, add, defer_ok(lin, out, add));
    return;
  }
  flush_pending();
  if (lin.kind == DevLinear::kTernary) {
    cuda::norm_quant(in, ldin, row_map, norm_w, rows, lin.k, eps, nullptr, xq_, lin.kp, inv_s_, sumq_, stream_,
                     tcb_planes_for(lin, rows));
    ternary_quantized(lin, rows, out, ldout, add, defer_ok(lin, out, add));
    return;
  }
  if (lin.kind == DevLinear::kInt8) {  // statistics per segment: row r of `in` is in segment seg_d_[row_map[r]]
    const float* src = in;
    if (norm_w || row_map || ldin != lin.k) {
      cuda::norm_quant(in, ldin, row_map, norm_w, rows, lin.k, eps, h_, nullptr, 0, nullptr, nullptr, stream_);
      src = h_;
    }
    lin.i8->forward(src, lin.k, rows, seg_d_, row_map, out, ldout, add, *i8ws_, stream_);
    return;
  }
  const float one = 1.0f, zero = 0.0f;
  const bool direct_out = !add && !lin.bias && ldout == lin.n;
  float* dst = direct_out ? out : tmp_;
  if (lin.kind == DevLinear::kBF16) {
    cuda::norm_to_bf16(in, ldin, row_map, norm_w, rows, lin.k, eps, nullptr, selb_, stream_);
    check_blas(cublasGemmEx(blas_, CUBLAS_OP_T, CUBLAS_OP_N, lin.n, rows, lin.k, &one, lin.wb, CUDA_R_16BF, lin.k,
                            selb_, CUDA_R_16BF, lin.k, &zero, dst, CUDA_R_32F, lin.n, CUBLAS_COMPUTE_32F,
                            CUBLAS_GEMM_DEFAULT),
               "cublasGemmEx (bf16)");
  } else {
    const float* src = in;
    if (norm_w || row_map || ldin != lin.k) {
      cuda::norm_quant(in, ldin, row_map, norm_w, rows, lin.k, eps, h_, nullptr, 0, nullptr, nullptr, stream_);
      src = h_;
    }
    check_blas(cublasSgemm(blas_, CUBLAS_OP_T, CUBLAS_OP_N, lin.n, rows, lin.k, &one, lin.wf, lin.k, src, lin.k,
                           &zero, dst, lin.n),
               "cublasSgemm");
  }
  if (!direct_out) {
    TRITIUM_CHECK(ldout == lin.n, "CUDA backend: strided float projection output");
    cuda::bias_add(tmp_, lin.bias, rows, lin.n, out, add, stream_);
  }
}

void CudaBackend::ternary_quantized(const DevLinear& lin, int rows, float* out, int64_t ldout, bool add, bool defer) {
  cuda::TernaryEpilogue ep = lin.seg;
  ep.y = out;
  ep.ldy = ldout;
  ep.add = add;
  if (lin.gs) {
    cuda::ternary_grouped_matmul(lin.w2, lin.gs, lin.bias, lin.n, lin.np, lin.k, lin.kp, xq_, inv_s_, rows, ep,
                                 stream_);
  } else if (lin.w8 && rows >= kInt8GemmMinRows) {  // the int8 copy: cuBLASLt's exact int32 sums, then the same epilogue
    // Whatever read inv_s_ / acc8_ last has consumed or flushed its pending sums (apply, the GLU): they are
    // overwritten now.
    TRITIUM_CHECK(!pending_.acc, "CUDA backend: an int8 GEMM's sums still pending at the next GEMM");
    const cuda::Int8GemmConfig cfg = int8_gemm_config(lin, rows, add && out == x_);
    i8ws_->gemm(lin.w8, lin.np8, lin.kp, xq_, rows, acc8_, lin.np8, stream_, 2, cfg);
    pending_ = cuda::PendingSums{acc8_, lin.np8, inv_s_, ep};
    pending_.parts = cfg.splits;  // a K-split GEMM's parts, added by the reader
    pending_.part_stride = cuda::Int8Workspace::part_stride(rows, lin.np8);
    pending_n_ = lin.n;
    pending_rows_ = rows;
    if (!defer) flush_pending();
  } else if (tcb_kernel_for(lin, rows)) {
    cuda::tcb_matmul(lin.wt, lin.negc, lin.n, lin.kp, xb_, inv_s_, rows, ep, stream_);
  } else if (lin.wt) {  // more tokens: the tc2 kernels over a rewritten copy (~2 x 2 bits per weight of traffic)
    const int np2 = (lin.n + 63) / 64 * 64;
    cuda::tcb_to_tc2(lin.wt, lin.n, lin.kp, tc2_scratch_, np2, stream_);
    // weights_from_stream: the GEMVs read their weights before waiting for the previous kernel, here the rewrite.
    cuda::ternary_matmul(tc2_scratch_, lin.n, np2, lin.kp, xq_, sumq_, inv_s_, rows, ep, stream_,
                         cuda::TernaryKernel::kAuto, 0, /*weights_from_stream=*/true);
  } else {
    cuda::ternary_matmul(lin.w2, lin.n, lin.np, lin.kp, xq_, sumq_, inv_s_, rows, ep, stream_);
  }
}

void CudaBackend::flush_pending() {
  if (!pending_.acc) return;
  cuda::ternary_epilogue(pending_.acc, pending_.ldacc, pending_rows_, pending_n_, pending_.inv_s, pending_.ep,
                         stream_, pending_.parts, pending_.part_stride);
  pending_ = {};
}

}  // namespace tritium::cuda_detail
#endif
