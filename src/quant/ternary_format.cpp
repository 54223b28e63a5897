#include "quant/ternary_format.h"

#include "core/error.h"
#include "quant/ternary_int8.h"

namespace tritium {

std::string_view ternary_format_name(TernaryFormat f) {
  switch (f) {
    case TernaryFormat::kInt8: return "int8";
    case TernaryFormat::kI2: return "i2";
    case TernaryFormat::kTQ1: return "tq1";
    case TernaryFormat::kBitcos: return "bitcos";
  }
  return "?";
}

TernaryFormat parse_ternary_format(std::string_view s) {
  if (s == "int8") return TernaryFormat::kInt8;
  if (s == "i2") return TernaryFormat::kI2;
  if (s == "tq1") return TernaryFormat::kTQ1;
  if (s == "bitcos") return TernaryFormat::kBitcos;
  fail("unknown ternary weight format '{}' (expected int8, i2, tq1 or bitcos)", s);
}

std::unique_ptr<PackedTernary> pack_ternary(TernaryFormat f, const int8_t* w, int64_t n, int64_t k) {
  for (int64_t i = 0; i < n * k; ++i) {
    if (w[i] < -1 || w[i] > 1) fail("pack_ternary: value {} at index {} is not in {{-1, 0, 1}}", int(w[i]), i);
  }
  switch (f) {
    case TernaryFormat::kInt8: return std::make_unique<TernaryInt8>(w, n, k);
    default: break;
  }
  fail("ternary format '{}' is not implemented", ternary_format_name(f));
}

}  // namespace tritium
