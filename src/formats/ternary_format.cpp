#include "formats/ternary_format.h"

#include <algorithm>

#include "core/error.h"
#include "core/parallel.h"
#include "formats/ternary_bitcos.h"
#include "formats/ternary_i2.h"
#include "formats/ternary_int8.h"
#include "formats/ternary_tq1.h"

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
  if (n <= 0 || k <= 0) fail("pack_ternary: shape [{}, {}] must be positive", n, k);
  for (int64_t i = 0; i < n * k; ++i) {
    if (w[i] < -1 || w[i] > 1) fail("pack_ternary: value {} at index {} is not in {{-1, 0, 1}}", int(w[i]), i);
  }
  switch (f) {
    case TernaryFormat::kInt8: return std::make_unique<TernaryInt8>(w, n, k);
    case TernaryFormat::kI2: return std::make_unique<TernaryI2>(w, n, k);
    case TernaryFormat::kTQ1: return std::make_unique<TernaryTQ1>(w, n, k);
    case TernaryFormat::kBitcos: return std::make_unique<TernaryBitcos>(w, n, k);
  }
  fail("ternary format '{}' is not implemented", ternary_format_name(f));
}

std::unique_ptr<PackedTernary> ternary_from_buffers(TernaryFormat f, int64_t n, int64_t k,
                                                    std::span<const std::span<const uint8_t>> buffers, bool copy) {
  if (n <= 0 || k <= 0) fail("ternary_from_buffers: shape [{}, {}] must be positive", n, k);
  const size_t want = f == TernaryFormat::kBitcos ? 3 : 1;
  if (buffers.size() != want) {
    fail("ternary_from_buffers: format {} needs {} buffer(s), got {}", ternary_format_name(f), want, buffers.size());
  }
  switch (f) {
    case TernaryFormat::kInt8: {
      if (buffers[0].size() != static_cast<size_t>(n * k)) {
        fail("ternary_from_buffers: int8 [{}, {}] needs {} bytes, got {}", n, k, n * k, buffers[0].size());
      }
      const auto* w = reinterpret_cast<const int8_t*>(buffers[0].data());
      for (int64_t i = 0; i < n * k; ++i) {
        if (w[i] < -1 || w[i] > 1) fail("ternary_from_buffers: int8 value {} at index {} is not ternary", int(w[i]), i);
      }
      return std::make_unique<TernaryInt8>(w, n, k);
    }
    case TernaryFormat::kI2: return std::make_unique<TernaryI2>(n, k, buffers[0], copy);
    case TernaryFormat::kTQ1: return std::make_unique<TernaryTQ1>(n, k, buffers[0], copy);
    case TernaryFormat::kBitcos:
      return std::make_unique<TernaryBitcos>(n, k, buffers[0], buffers[1], buffers[2], copy);
  }
  fail("ternary format '{}' is not implemented", ternary_format_name(f));
}

}  // namespace tritium
