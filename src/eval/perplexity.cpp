#include "eval/perplexity.h"

#include <cmath>

#include "core/error.h"
#include "kv/block_allocator.h"
#include "engine/sampler.h"

namespace tritium {

PerplexityResult compute_perplexity(Backend& backend, const std::vector<int32_t>& tokens,
                                    const PerplexityOptions& opts,
                                    const std::function<void(int, int, double)>& on_chunk) {
  const ModelConfig& c = backend.model().config();
  const int n_ctx = opts.n_ctx;
  TRITIUM_CHECK(n_ctx >= 4, "perplexity: context {} is too small", n_ctx);
  TRITIUM_CHECK(n_ctx <= c.max_position_embeddings, "perplexity: context {} exceeds the model context of {} tokens",
                n_ctx, c.max_position_embeddings);
  const int body = opts.prepend_bos ? n_ctx - 1 : n_ctx;
  int n_chunks = static_cast<int>(tokens.size() / static_cast<size_t>(body));
  TRITIUM_CHECK(n_chunks > 0, "perplexity: the text has {} tokens, need at least {} for one chunk of {}",
                tokens.size(), body, n_ctx);
  if (opts.max_chunks > 0) n_chunks = std::min(n_chunks, opts.max_chunks);

  KvCacheSpec spec{c.num_layers, c.num_kv_heads, c.head_dim, 16, (n_ctx + 15) / 16};
  spec.dtype = opts.kv_dtype;
  spec.quant_scale = opts.kv_scale;
  KvCache cache(spec);
  BlockAllocator alloc(spec.num_blocks);
  BlockTable bt;
  bt.reserve(alloc, n_ctx, spec.block_size);

  PerplexityResult r;
  const int V = c.vocab_size;
  std::vector<int32_t> chunk(n_ctx);
  std::vector<float> logits;
  for (int ci = 0; ci < n_chunks; ++ci) {
    int o = 0;
    if (opts.prepend_bos) chunk[o++] = opts.bos_id;
    for (int i = 0; i < body; ++i) chunk[o++] = tokens[static_cast<size_t>(ci) * body + i];
    BatchChunk ch{chunk, 0, bt.blocks, true};
    backend.forward(std::span<const BatchChunk>(&ch, 1), cache, logits);
    for (int p = n_ctx / 2; p <= n_ctx - 2; ++p) {
      const std::span<const float> row(&logits[static_cast<size_t>(p) * V], V);
      r.nll_sum -= log_prob(row, chunk[p + 1]);
      if (opts.on_scored) opts.on_scored(row, chunk[p + 1]);
      ++r.scored_tokens;
    }
    r.chunks = ci + 1;
    r.ppl = std::exp(r.nll_sum / static_cast<double>(r.scored_tokens));
    r.chunk_ppl.push_back(r.ppl);
    if (on_chunk) on_chunk(ci + 1, n_chunks, r.ppl);
  }
  return r;
}

}  // namespace tritium
