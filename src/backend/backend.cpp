#include "backend/backend.h"

#include "core/error.h"

namespace tritium {

BatchShape validate_batch(const ModelConfig& c, std::span<const BatchChunk> batch, const KvCache& cache) {
  BatchShape s;
  for (const auto& ch : batch) {
    TRITIUM_CHECK(!ch.tokens.empty(), "forward: empty chunk");
    const int64_t end = ch.start_pos + static_cast<int64_t>(ch.tokens.size());
    TRITIUM_CHECK(end <= c.max_position_embeddings, "forward: position {} exceeds the model context of {} tokens",
                  end - 1, c.max_position_embeddings);
    TRITIUM_CHECK(static_cast<int64_t>(ch.block_table.size()) * cache.block_size() >= end,
                  "forward: block table covers {} positions, need {}", ch.block_table.size() * cache.block_size(),
                  end);
    for (int32_t tok : ch.tokens)
      TRITIUM_CHECK(tok >= 0 && tok < c.vocab_size, "forward: token id {} outside the vocabulary of {}", tok,
                    c.vocab_size);
    s.tokens += static_cast<int64_t>(ch.tokens.size());
    s.logit_rows += ch.all_logits ? static_cast<int64_t>(ch.tokens.size()) : 1;
  }
  return s;
}

std::vector<int64_t> segment_row_begins(std::span<const BatchChunk> batch) {
  std::vector<int64_t> begins;
  int64_t row = 0;
  for (const auto& ch : batch) {
    const int64_t T = static_cast<int64_t>(ch.tokens.size());
    for (int64_t t = 0; t < T; ++t)
      if (starts_segment(ch, t)) begins.push_back(row + t);
    row += T;
  }
  return begins;
}

void Backend::read_kv(KvCache& cache, int layer, std::span<const int32_t> table, int64_t n, float* k, float* v) {
  cache.gather(layer, table.data(), n, k, v);
}

void Backend::forward_sample(std::span<const BatchChunk>, KvCache&, std::span<const RowSampling>,
                             std::vector<SampledToken>&) {
  fail("{}: this backend does not sample on the device", name());
}

}  // namespace tritium
