#include "formats/ternary_int8.h"

#include <cstring>


namespace tritium {

TernaryInt8::TernaryInt8(const int8_t* w, int64_t n, int64_t k)
    : PackedTernary(n, k), data_(w, w + n * k) {}

void TernaryInt8::unpack(int8_t* out) const {
  if (!data_.empty()) std::memcpy(out, data_.data(), data_.size());
}

}  // namespace tritium
