#include "parallel/shard.h"

#include <cstring>

#include "core/error.h"

namespace tritium {
namespace {

std::vector<float> take_rows(const std::vector<float>& v, int64_t row_len, const std::vector<Range>& ranges) {
  std::vector<float> out;
  if (v.empty()) return out;
  for (const Range& r : ranges) out.insert(out.end(), v.begin() + r.begin * row_len, v.begin() + r.end * row_len);
  return out;
}

int64_t total_rows(const std::vector<Range>& ranges) {
  int64_t n = 0;
  for (const Range& r : ranges) n += r.size();
  return n;
}

}  // namespace

std::unique_ptr<Linear> slice_linear_rows(const Linear& lin, const std::vector<Range>& ranges) {
  const int64_t N = lin.out_features(), K = lin.in_features(), n = total_rows(ranges);
  for (const Range& r : ranges)
    TRITIUM_CHECK(r.begin >= 0 && r.begin < r.end && r.end <= N, "tensor parallel: row range [{}, {}) outside {} rows",
                  r.begin, r.end, N);
  if (const auto* f = dynamic_cast<const FloatLinear*>(&lin))
    return std::make_unique<FloatLinear>(take_rows(f->weight(), K, ranges), take_rows(f->bias(), 1, ranges), n, K);
  if (const auto* t = dynamic_cast<const TernaryLinear*>(&lin)) {
    const PackedTernary& p = t->packed();
    std::vector<int8_t> w(static_cast<size_t>(N * K));
    p.unpack(w.data());
    std::vector<int8_t> ws;
    ws.reserve(static_cast<size_t>(n * K));
    for (const Range& r : ranges) ws.insert(ws.end(), w.begin() + r.begin * K, w.begin() + r.end * K);
    auto packed = pack_ternary(p.format(), ws.data(), n, K);
    std::unique_ptr<TernaryLinear> out;
    if (t->has_group_scales()) {
      out = std::make_unique<TernaryLinear>(std::move(packed), take_rows(t->group_scales(), p.groups(), ranges));
    } else {
      // Segment of each range; adjacent pieces of one segment merge.
      std::vector<TernaryLinear::Segment> segs;
      int prev_seg = -1;
      for (const Range& r : ranges) {
        int64_t s0 = 0;
        int si = 0;
        for (; si < static_cast<int>(t->segments().size()); ++si) {
          const int64_t s1 = s0 + t->segments()[si].rows;
          if (r.begin >= s0 && r.begin < s1) {
            TRITIUM_CHECK(r.end <= s1, "tensor parallel: row range [{}, {}) crosses a weight segment end ({})",
                          r.begin, r.end, s1);
            break;
          }
          s0 = s1;
        }
        if (si == prev_seg) segs.back().rows += r.size();
        else segs.push_back({r.size(), t->segments()[si].scale});
        prev_seg = si;
      }
      out = std::make_unique<TernaryLinear>(std::move(packed), std::move(segs));
    }
    out->set_bias(take_rows(t->bias(), 1, ranges));
    return out;
  }
  if (const auto* q = dynamic_cast<const Int8Linear*>(&lin)) {
    // int8 (LLM.int8() family): codes, per-row scales, row sums and the fp16 copy follow the rows; per-tensor
    // scales and zero points are shared. Activation statistics are taken from the (replicated) input, so each
    // output row is computed exactly as in the unsharded layer.
    const Int8Projection& impl = q->impl();
    const Int8Weight& w = impl.weight();
    Int8Weight s;
    s.method = w.method;
    s.n = n;
    s.k = K;
    s.zero = w.zero;
    s.scale = w.scale.size() == 1 ? w.scale : take_rows(w.scale, 1, ranges);
    for (const Range& r : ranges) {
      s.q.insert(s.q.end(), w.q.begin() + r.begin * K, w.q.begin() + r.end * K);
      if (!w.row_sum.empty()) s.row_sum.insert(s.row_sum.end(), w.row_sum.begin() + r.begin, w.row_sum.begin() + r.end);
      if (!w.f16.empty()) s.f16.insert(s.f16.end(), w.f16.begin() + r.begin * K, w.f16.begin() + r.end * K);
    }
    return std::make_unique<Int8Linear>(Int8Projection(std::move(s), take_rows(impl.bias(), 1, ranges), impl.options()));
  }
  fail("tensor parallel: projection format '{}' is not partitioned (float, ternary and int8 only)", lin.format_name());
}

std::unique_ptr<Linear> slice_linear_cols(const Linear& lin, Range cols, bool keep_bias) {
  const auto* f = dynamic_cast<const FloatLinear*>(&lin);
  TRITIUM_CHECK(f, "tensor parallel: a row-parallel (K-split) projection must be float, got '{}'", lin.format_name());
  const int64_t N = lin.out_features(), K = lin.in_features();
  TRITIUM_CHECK(cols.begin >= 0 && cols.begin < cols.end && cols.end <= K,
                "tensor parallel: column range [{}, {}) outside {} columns", cols.begin, cols.end, K);
  std::vector<float> w(static_cast<size_t>(N * cols.size()));
  for (int64_t r = 0; r < N; ++r)
    std::memcpy(&w[r * cols.size()], f->weight().data() + r * K + cols.begin, sizeof(float) * cols.size());
  return std::make_unique<FloatLinear>(std::move(w), keep_bias ? f->bias() : std::vector<float>{}, N, cols.size());
}

TensorParallelPlan make_tp_plan(const Transformer& full, int rank, int world) {
  const ModelConfig& c = full.config();
  TRITIUM_CHECK(world >= 1 && rank >= 0 && rank < world, "tensor parallel: rank {} outside a group of {}", rank,
                world);
  TRITIUM_CHECK(world <= c.num_kv_heads,
                "tensor parallel: {} ranks but the model has {} KV heads (a KV head is not split; use at most {} "
                "ranks)",
                world, c.num_kv_heads, c.num_kv_heads);
  TensorParallelPlan p;
  p.rank = rank;
  p.world = world;
  p.hidden = c.hidden_size;
  p.q_dim_full = c.q_dim();
  p.inter_full = c.intermediate_size;
  p.vocab = c.vocab_size;
  const int group = c.num_heads / c.num_kv_heads;
  for (int r = 0; r < world; ++r) {
    p.q_cols.push_back(split_range(c.num_kv_heads, world, r).size() * group * c.head_dim);
    p.i_cols.push_back(split_range(c.intermediate_size, world, r).size());
    p.v_rows.push_back(split_range(c.vocab_size, world, r).size());
  }
  bool float_od = true;
  for (const auto& L : full.layers())
    float_od = float_od && dynamic_cast<const FloatLinear*>(L.o.get()) && dynamic_cast<const FloatLinear*>(L.down.get());
  p.gather_mode = c.sub_norms || !float_od;
  return p;
}

std::unique_ptr<Transformer> shard_transformer(const Transformer& full, int rank, int world) {
  const TensorParallelPlan plan = make_tp_plan(full, rank, world);
  const ModelConfig& c = full.config();
  TRITIUM_CHECK(!full.tp_plan(), "tensor parallel: the model is already a shard");
  const int group = c.num_heads / c.num_kv_heads;
  const Range kvh = split_range(c.num_kv_heads, world, rank);
  const Range inter = split_range(c.intermediate_size, world, rank);
  const Range voc = split_range(c.vocab_size, world, rank);
  const int64_t hd = c.head_dim, qd = c.q_dim(), kvd = c.kv_dim(), I = c.intermediate_size;
  // q rows of the rank's query heads, then its k rows, then its v rows.
  const std::vector<Range> qkv_rows = {{kvh.begin * group * hd, kvh.end * group * hd},
                                       {qd + kvh.begin * hd, qd + kvh.end * hd},
                                       {qd + kvd + kvh.begin * hd, qd + kvd + kvh.end * hd}};
  const std::vector<Range> gu_rows = {{inter.begin, inter.end}, {I + inter.begin, I + inter.end}};
  const Range q_cols{kvh.begin * group * hd, kvh.end * group * hd};

  ModelConfig sc = c;
  sc.num_kv_heads = static_cast<int>(kvh.size());
  sc.num_heads = static_cast<int>(kvh.size()) * group;
  sc.intermediate_size = static_cast<int>(inter.size());

  std::vector<LayerWeights> layers;
  for (const LayerWeights& L : full.layers()) {
    LayerWeights s;
    s.input_norm = L.input_norm;
    s.post_attn_norm = L.post_attn_norm;
    s.attn_sub_norm = L.attn_sub_norm;  // full: applied after the all-gather (gather mode)
    s.ffn_sub_norm = L.ffn_sub_norm;
    s.q_norm = L.q_norm;  // per head: every rank's heads use the whole vector
    s.k_norm = L.k_norm;
    s.qkv = slice_linear_rows(*L.qkv, qkv_rows);
    s.gate_up = slice_linear_rows(*L.gate_up, gu_rows);
    if (plan.gather_mode) {
      s.o = slice_linear_rows(*L.o, {{0, L.o->out_features()}});
      s.down = slice_linear_rows(*L.down, {{0, L.down->out_features()}});
    } else {
      s.o = slice_linear_cols(*L.o, q_cols, rank == 0);
      s.down = slice_linear_cols(*L.down, inter, rank == 0);
    }
    layers.push_back(std::move(s));
  }
  auto lm_head = slice_linear_rows(full.lm_head(), {voc});
  auto embed = full.embedding_shared();
  auto out = std::make_unique<Transformer>(sc, embed, std::move(layers), full.final_norm(), std::move(lm_head));
  out->set_tp_plan(plan);
  return out;
}

}  // namespace tritium
