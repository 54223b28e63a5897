#include "formats/ternary_stats.h"

#include "core/error.h"
#include "formats/ternary_bitcos.h"
#include "formats/ternary_i2.h"
#include "formats/ternary_tq1.h"

namespace tritium {

const TernaryFormatBits& TernaryTensorStats::get(TernaryFormat f) const {
  for (const TernaryFormatBits& b : formats)
    if (b.format == f) return b;
  fail("ternary stats: no entry for format {}", ternary_format_name(f));
}

TernaryTensorStats ternary_tensor_stats(const int8_t* w, int64_t n, int64_t k, uint64_t scale_bytes) {
  if (n <= 0 || k <= 0) fail("ternary_tensor_stats: shape [{}, {}] must be positive", n, k);
  TernaryTensorStats st;
  st.rows = n;
  st.cols = k;
  st.count = static_cast<uint64_t>(n * k);
  for (uint64_t i = 0; i < st.count; ++i) {
    switch (w[i]) {
      case 0: ++st.zeros; break;
      case 1: ++st.positives; break;
      case -1: ++st.negatives; break;
      default: fail("ternary_tensor_stats: value {} at index {} is not in {{-1, 0, 1}}", int(w[i]), i);
    }
  }
  st.zero_density = static_cast<double>(st.zeros) / static_cast<double>(st.count);
  const double count = static_cast<double>(st.count);
  auto add = [&](TernaryFormat f, uint64_t bytes, double symbols) {
    TernaryFormatBits b;
    b.format = f;
    b.bytes = bytes;
    b.bits_symbols = symbols;
    b.bits_with_overhead = 8.0 * static_cast<double>(bytes) / count;
    b.bits_with_scales = 8.0 * static_cast<double>(bytes + scale_bytes) / count;
    st.formats.push_back(b);
  };
  add(TernaryFormat::kInt8, st.count, 8.0);
  add(TernaryFormat::kI2, TernaryI2::bytes_for(n, k), 2.0);
  add(TernaryFormat::kTQ1, TernaryTQ1::bytes_for(n, k), 8.0 / 5.0);
  add(TernaryFormat::kBitcos, TernaryBitcos::bytes_for(n, k, st.positives + st.negatives), 2.0 - st.zero_density);
  return st;
}

}  // namespace tritium
