#include "model/lm_head.h"

#include <algorithm>

#include "core/dtype.h"
#include "core/error.h"
#include "formats/q4_rows.h"
#include "formats/q6_rows.h"
#include "formats/ternary_i2.h"
#include "quant/int8_projection.h"
#include "quant/ternary_detect.h"

namespace tritium {

const std::vector<std::string>& lm_head_kind_names() {
  static const std::vector<std::string> k = {"auto", "f32", "bf16", "int8", "q6", "q4"};
  return k;
}

std::string resolve_lm_head_kind(const std::string& requested, bool stored_bf16) {
  if (requested.empty()) return "f32";
  if (requested != "auto") return requested;
  return stored_bf16 ? "bf16" : "f32";
}

namespace {

// The grouped formats (q6, q4) pack 64 columns per block.
void check_grouped_width(const std::string& kind, int64_t hidden) {
  if (hidden % 64 != 0)
    fail("--lm-head {} needs a hidden size that is a multiple of 64 (this model has {})", kind, hidden);
}

// Owned bf16 weights (rounded to nearest even) for a Bf16Linear.
std::unique_ptr<Linear> bf16_head_from_f32(const float* w, int64_t vocab, int64_t hidden) {
  auto owned = std::make_shared<std::vector<uint16_t>>(static_cast<size_t>(vocab * hidden));
  for (size_t i = 0; i < owned->size(); ++i) (*owned)[i] = f32_to_bf16(w[i]);
  const uint16_t* p = owned->data();
  return std::make_unique<Bf16Linear>(p, vocab, hidden, std::move(owned));
}

// Rows [r0, r0 + rows) of the table as float32: a pointer into a float32 table, else widened into `buf`.
const float* table_rows_f32(const Embedding& t, int64_t r0, int64_t rows, std::vector<float>& buf) {
  const int64_t H = t.cols();
  if (t.is_f32()) return t.f32_table()->data() + r0 * H;
  buf.resize(static_cast<size_t>(rows * H));
  for (int64_t r = 0; r < rows; ++r) t.row(r0 + r, buf.data() + r * H);
  return buf.data();
}

}  // namespace

std::unique_ptr<Linear> make_head_linear(std::vector<float> w, int64_t vocab, int64_t hidden, const std::string& kind) {
  TRITIUM_CHECK(static_cast<int64_t>(w.size()) == vocab * hidden, "lm_head: {} weights, expected {} x {}", w.size(),
                vocab, hidden);
  if (kind.empty() || kind == "f32") return std::make_unique<FloatLinear>(std::move(w), std::vector<float>{}, vocab, hidden);
  if (kind == "bf16") return bf16_head_from_f32(w.data(), vocab, hidden);
  if (kind == "int8")
    return std::make_unique<Int8Linear>(Int8Projection(Int8Method::kVectorwise, w.data(), vocab, hidden));
  if (kind == "q6") {
    check_grouped_width(kind, hidden);
    return std::make_unique<Q6Linear>(quantize_q6_rows(w.data(), vocab, hidden));
  }
  if (kind == "q4") {
    check_grouped_width(kind, hidden);
    return std::make_unique<Q4Linear>(quantize_q4_rows(w.data(), vocab, hidden));
  }
  fail("unknown lm_head storage '{}' (expected f32, bf16, int8, q6 or q4)", kind);
}

std::unique_ptr<Linear> make_head_from_table(const Embedding& t, const std::string& kind) {
  const int64_t V = t.rows(), H = t.cols();
  if (kind.empty() || kind == "f32") {
    if (t.is_f32()) return std::make_unique<FloatLinear>(t.f32_table(), std::vector<float>{}, V, H);
    std::vector<float> w;
    table_rows_f32(t, 0, V, w);
    return std::make_unique<FloatLinear>(std::move(w), std::vector<float>{}, V, H);
  }
  if (kind == "bf16") {
    if (t.is_bf16()) return std::make_unique<Bf16Linear>(t.bf16_data(), V, H, t.owner());
    std::vector<float> w;
    return bf16_head_from_f32(table_rows_f32(t, 0, V, w), V, H);
  }
  if (kind != "int8" && kind != "q6" && kind != "q4")
    fail("unknown lm_head storage '{}' (expected f32, bf16, int8, q6 or q4)", kind);
  if (kind != "int8") check_grouped_width(kind, H);
  // These formats quantize each row on its own, so a block of rows at a time gives the whole-table result.
  constexpr int64_t kBlock = 2048;
  std::vector<float> block;
  Int8Weight i8;
  i8.method = Int8Method::kVectorwise;
  i8.n = V;
  i8.k = H;
  Q6Rows q6;
  q6.n = V;
  q6.k = H;
  Q4Rows q4;
  q4.n = V;
  q4.k = H;
  if (kind == "int8") {
    i8.q.reserve(static_cast<size_t>(V * H));
    i8.scale.reserve(static_cast<size_t>(V));
  } else if (kind == "q6") {
    q6.codes.reserve(static_cast<size_t>(V * q6.row_bytes()));
    q6.scales.reserve(static_cast<size_t>(V * H / kQ6Group));
  } else {
    q4.codes.reserve(static_cast<size_t>(V * H / 2));
    q4.scales.reserve(static_cast<size_t>(V * H / kQ4Group));
  }
  for (int64_t r0 = 0; r0 < V; r0 += kBlock) {
    const int64_t rows = std::min(kBlock, V - r0);
    const float* src = table_rows_f32(t, r0, rows, block);
    if (kind == "int8") {
      Int8Weight part = quantize_int8_weight(Int8Method::kVectorwise, src, rows, H);
      i8.q.insert(i8.q.end(), part.q.begin(), part.q.end());
      i8.scale.insert(i8.scale.end(), part.scale.begin(), part.scale.end());
    } else if (kind == "q6") {
      Q6Rows part = quantize_q6_rows(src, rows, H);
      q6.codes.insert(q6.codes.end(), part.codes.begin(), part.codes.end());
      q6.scales.insert(q6.scales.end(), part.scales.begin(), part.scales.end());
    } else {
      Q4Rows part = quantize_q4_rows(src, rows, H);
      q4.codes.insert(q4.codes.end(), part.codes.begin(), part.codes.end());
      q4.scales.insert(q4.scales.end(), part.scales.begin(), part.scales.end());
    }
    t.release_rows(r0, rows);  // quantized: the file's bytes need not stay resident
  }
  if (kind == "int8") return std::make_unique<Int8Linear>(Int8Projection(std::move(i8)));
  if (kind == "q6") return std::make_unique<Q6Linear>(std::move(q6));
  return std::make_unique<Q4Linear>(std::move(q4));
}

std::unique_ptr<Linear> ternary_head_from_table(const Embedding& t, TernaryFormat fmt) {
  const int64_t V = t.rows(), H = t.cols(), G = (H + kTernaryGroupK - 1) / kTernaryGroupK;
  constexpr int64_t kBlock = 256;  // a multiple of i2's 16-row tiles; 2 MB of float32 rows at a time (H 2048)
  std::vector<float> scales(static_cast<size_t>(V * G));
  std::vector<float> block;
  // Rows [r0, r0 + rows) detected; their codes into `codes` (int8 [rows, H]) and their scales into `scales`.
  auto detect_rows = [&](int64_t r0, int64_t rows, int8_t* codes) {
    const float* src = table_rows_f32(t, r0, rows, block);
    const auto q = detect_ternary(src, rows, H, kTernaryGroupK);
    t.release_rows(r0, rows);  // packed: the file's bytes need not stay resident
    if (!q) return false;
    std::copy(q->q.begin(), q->q.end(), codes);
    for (int64_t i = 0; i < rows * G; ++i)
      scales[static_cast<size_t>(r0 * G + i)] = q->group_size == 0 ? q->scales[0] : q->scales[static_cast<size_t>(i)];
    return true;
  };
  if (fmt == TernaryFormat::kI2) {
    // i2 packs a block of rows at a time: the head never exists as one int8 per weight (311 MB for a
    // 151,936 x 2,048 head).
    bool ternary = true;
    auto packed = std::make_unique<TernaryI2>(V, H, kBlock, [&](int64_t r0, int64_t rows, int8_t* w) {
      if (ternary) ternary = detect_rows(r0, rows, w);
      if (!ternary) std::fill(w, w + rows * H, int8_t{0});
    });
    if (!ternary) return nullptr;
    return std::make_unique<TernaryLinear>(std::move(packed), std::move(scales));
  }
  std::vector<int8_t> codes(static_cast<size_t>(V * H));
  for (int64_t r0 = 0; r0 < V; r0 += kBlock)
    if (!detect_rows(r0, std::min(kBlock, V - r0), codes.data() + r0 * H)) return nullptr;
  return std::make_unique<TernaryLinear>(pack_ternary(fmt, codes.data(), V, H), std::move(scales));
}

}  // namespace tritium
