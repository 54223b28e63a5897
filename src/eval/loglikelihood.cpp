#include "eval/loglikelihood.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/error.h"
#include "kv/block_allocator.h"

namespace tritium {

LoglikelihoodRequest encode_pair(const Tokenizer& tok, std::string_view context, std::string_view continuation,
                                 bool add_special_tokens, std::optional<int32_t> prefix_token) {
  LoglikelihoodRequest r;
  if (context.empty()) {
    TRITIUM_CHECK(prefix_token.has_value(), "encode_pair: empty context and no prefix token");
    r.context = {*prefix_token};
    r.continuation = tok.encode(continuation, add_special_tokens);
    return r;
  }
  std::string ctx(context), cont(continuation);
  // Python str.rstrip() strips Unicode whitespace; the ASCII set covers the task data (and UTF-8 continuation
  // bytes are never ASCII, so stripping bytes is safe).
  size_t end = ctx.size();
  while (end > 0 && (ctx[end - 1] == ' ' || ctx[end - 1] == '\t' || ctx[end - 1] == '\n' || ctx[end - 1] == '\r' ||
                     ctx[end - 1] == '\f' || ctx[end - 1] == '\v'))
    --end;
  if (end < ctx.size()) {
    cont = ctx.substr(end) + cont;
    ctx.resize(end);
  }
  const std::vector<int32_t> whole = tok.encode(ctx + cont, add_special_tokens);
  r.context = tok.encode(ctx, add_special_tokens);
  if (r.context.size() < whole.size())
    r.continuation.assign(whole.begin() + static_cast<std::ptrdiff_t>(r.context.size()), whole.end());
  return r;
}

std::pair<double, bool> token_logprob(std::span<const float> logits, int32_t target) {
  float mx = -INFINITY;
  size_t arg = 0;
  for (size_t i = 0; i < logits.size(); ++i)
    if (logits[i] > mx) {
      mx = logits[i];
      arg = i;
    }
  double s = 0;
  for (float v : logits) s += std::exp(static_cast<double>(v) - mx);
  const double lp = static_cast<double>(logits[static_cast<size_t>(target)]) - mx - std::log(s);
  return {lp, arg == static_cast<size_t>(target)};
}

LoglikelihoodScorer::LoglikelihoodScorer(Backend& backend, ScorerOptions opts)
    : backend_(backend), opts_(opts) {
  const int model_max = backend.model().config().max_position_embeddings;
  max_length_ = opts.max_length > 0 ? opts.max_length : model_max;
  TRITIUM_CHECK(max_length_ >= 2 && max_length_ <= model_max,
                "loglikelihood: max_length {} must be in [2, {}] (the model context)", max_length_, model_max);
  TRITIUM_CHECK(opts.batch_tokens >= 1, "loglikelihood: batch_tokens must be positive");
  TRITIUM_CHECK(opts.block_size >= 1, "loglikelihood: block_size must be positive");
}

namespace {

struct Prepared {
  std::vector<int32_t> inp;  ///< model input (left-truncated)
  std::vector<int32_t> target;  ///< continuation ids
  size_t first_scored = 0;   ///< position whose logits predict the first continuation token
  size_t shared = 0;         ///< tokens [0, shared) are prefilled once per group (a multiple of block_size)
};

int64_t blocks_for(size_t n, int bs) { return static_cast<int64_t>((n + bs - 1) / bs); }

}  // namespace

std::vector<LoglikelihoodResult> LoglikelihoodScorer::score(std::span<const LoglikelihoodRequest> requests,
                                                            const std::function<void(size_t, size_t)>& progress,
                                                            const ScoredLogitsFn& on_logits) const {
  const int bs = opts_.block_size;
  const size_t L = static_cast<size_t>(max_length_);
  std::vector<Prepared> prep(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    const auto& r = requests[i];
    TRITIUM_CHECK(!r.continuation.empty(), "loglikelihood: request {} has an empty continuation", i);
    TRITIUM_CHECK(r.continuation.size() <= L, "loglikelihood: request {} has a continuation of {} tokens, longer "
                  "than the context of {}", i, r.continuation.size(), L);
    TRITIUM_CHECK(!r.context.empty(), "loglikelihood: request {} has an empty context", i);
    for (int32_t t : r.continuation)
      TRITIUM_CHECK(t >= 0 && t < backend_.model().vocab_size(), "loglikelihood: request {}: token id {} outside the "
                    "vocabulary of {}", i, t, backend_.model().vocab_size());
    std::vector<int32_t> full = r.context;
    full.insert(full.end(), r.continuation.begin(), r.continuation.end());
    if (full.size() > L + 1) full.erase(full.begin(), full.end() - static_cast<std::ptrdiff_t>(L + 1));
    Prepared& p = prep[i];
    p.inp.assign(full.begin(), full.end() - 1);
    p.target = r.continuation;
    p.first_scored = p.inp.size() - r.continuation.size();
    p.shared = (p.first_scored / bs) * bs;
  }
  // Groups: runs of consecutive requests with the same shared prefix.
  std::vector<std::pair<size_t, size_t>> groups;  // [begin, end)
  for (size_t i = 0; i < prep.size();) {
    size_t j = i + 1;
    while (j < prep.size() && prep[j].shared == prep[i].shared &&
           std::equal(prep[i].inp.begin(), prep[i].inp.begin() + static_cast<std::ptrdiff_t>(prep[i].shared),
                      prep[j].inp.begin()))
      ++j;
    groups.emplace_back(i, j);
    i = j;
  }
  auto group_blocks = [&](const std::pair<size_t, size_t>& g) {
    int64_t b = static_cast<int64_t>(prep[g.first].shared / bs);
    for (size_t k = g.first; k < g.second; ++k) b += blocks_for(prep[k].inp.size() - prep[k].shared, bs);
    return b;
  };
  auto group_tokens = [&](const std::pair<size_t, size_t>& g) {
    size_t t = prep[g.first].shared;
    for (size_t k = g.first; k < g.second; ++k) t += prep[k].inp.size() - prep[k].shared;
    return t;
  };
  int64_t max_group = 0;
  for (const auto& g : groups) max_group = std::max(max_group, group_blocks(g));
  const ModelConfig& c = backend_.model().config();
  KvCacheSpec spec{c.num_layers, c.num_kv_heads, c.head_dim, bs,
                   std::max<int64_t>(max_group, blocks_for(static_cast<size_t>(opts_.batch_tokens), bs) + 64)};
  spec.dtype = opts_.kv_dtype;
  spec.quant_scale = opts_.kv_scale;
  KvCache cache(spec);
  BlockAllocator alloc(spec.num_blocks);

  std::vector<LoglikelihoodResult> out(requests.size());
  std::vector<float> logits;
  const int V = c.vocab_size;
  size_t gi = 0, done = 0;
  while (gi < groups.size()) {
    // Take groups while they fit the token budget and the block pool (always at least one).
    size_t ge = gi, tokens = 0;
    int64_t blocks = 0;
    while (ge < groups.size()) {
      const size_t t = group_tokens(groups[ge]);
      const int64_t b = group_blocks(groups[ge]);
      if (ge > gi && (tokens + t > static_cast<size_t>(opts_.batch_tokens) || blocks + b > spec.num_blocks)) break;
      tokens += t;
      blocks += b;
      ++ge;
    }
    // Block tables: the group's shared blocks, then each request's own blocks.
    std::vector<std::vector<int32_t>> tables(prep.size());
    std::vector<int32_t> used;
    auto take = [&]() {
      const int32_t b = alloc.allocate();
      TRITIUM_CHECK(b >= 0, "loglikelihood: KV cache pool exhausted");
      used.push_back(b);
      return b;
    };
    std::vector<BatchChunk> prefill;
    std::vector<std::vector<int32_t>> shared_tables(ge - gi);
    for (size_t g = gi; g < ge; ++g) {
      const Prepared& head = prep[groups[g].first];
      auto& st = shared_tables[g - gi];
      for (size_t b = 0; b < head.shared / bs; ++b) st.push_back(take());
      for (size_t k = groups[g].first; k < groups[g].second; ++k) {
        tables[k] = st;
        for (int64_t b = 0; b < blocks_for(prep[k].inp.size() - prep[k].shared, bs); ++b) tables[k].push_back(take());
      }
    }
    for (size_t g = gi; g < ge; ++g) {
      const Prepared& head = prep[groups[g].first];
      if (head.shared == 0) continue;
      prefill.push_back(BatchChunk{std::span<const int32_t>(head.inp.data(), head.shared), 0,
                                   shared_tables[g - gi], false});
    }
    if (!prefill.empty()) backend_.forward(prefill, cache, logits);
    std::vector<BatchChunk> tails;
    const size_t rbegin = groups[gi].first, rend = groups[ge - 1].second;
    for (size_t k = rbegin; k < rend; ++k) {
      const Prepared& p = prep[k];
      tails.push_back(BatchChunk{std::span<const int32_t>(p.inp.data() + p.shared, p.inp.size() - p.shared),
                                 static_cast<int64_t>(p.shared), tables[k], true});
    }
    backend_.forward(tails, cache, logits);
    size_t row = 0;
    for (size_t k = rbegin; k < rend; ++k) {
      const Prepared& p = prep[k];
      LoglikelihoodResult& r = out[k];
      r.is_greedy = true;
      for (size_t t = 0; t < p.target.size(); ++t) {
        const size_t pos = p.first_scored + t;
        std::span<const float> lg(&logits[(row + pos - p.shared) * static_cast<size_t>(V)], static_cast<size_t>(V));
        const auto [lp, greedy] = token_logprob(lg, p.target[t]);
        r.logprob += lp;
        r.is_greedy = r.is_greedy && greedy;
        if (on_logits) on_logits(k, t, lg, p.target[t]);
      }
      row += p.inp.size() - p.shared;
    }
    for (int32_t b : used) alloc.free(b);
    done = rend;
    if (progress) progress(done, requests.size());
    gi = ge;
  }
  return out;
}

}  // namespace tritium
