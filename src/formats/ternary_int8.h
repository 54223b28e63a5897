// tritium formats: the int8 ternary format — one signed byte per weight, row-major [N, K].
// 8 bits/weight; the naive baseline every packed format is measured against.
#pragma once

#include "formats/ternary_format.h"

namespace tritium {

class TernaryInt8 final : public PackedTernary {
 public:
  /// w: int8 [N, K] in {-1, 0, 1}; copied.
  TernaryInt8(const int8_t* w, int64_t n, int64_t k);
  TernaryFormat format() const override { return TernaryFormat::kInt8; }
  size_t bytes() const override { return data_.size(); }
  void unpack(int8_t* out) const override;
  const int8_t* data() const { return data_.data(); }
  std::vector<TernaryBuffer> buffers() const override {
    return {{"int8", {reinterpret_cast<const uint8_t*>(data_.data()), data_.size()}}};
  }

 private:
  std::vector<int8_t> data_;
};

}  // namespace tritium
