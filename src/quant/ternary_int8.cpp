#include "quant/ternary_int8.h"

#include <cstring>

#include "core/parallel.h"

namespace tritium {

TernaryInt8::TernaryInt8(const int8_t* w, int64_t n, int64_t k)
    : PackedTernary(n, k), data_(w, w + n * k) {}

void TernaryInt8::gemm_i32(const int8_t* x, int64_t M, int32_t* acc) const {
  const int64_t N = n_, K = k_;
  const int8_t* W = data_.data();
  parallel_for(N, 16, [&](int64_t n0, int64_t n1) {
    for (int64_t m = 0; m < M; ++m) {
      const int8_t* xr = x + m * K;
      for (int64_t n = n0; n < n1; ++n) {
        const int8_t* wr = W + n * K;
        int32_t s = 0;
        for (int64_t k = 0; k < K; ++k) s += static_cast<int32_t>(xr[k]) * wr[k];
        acc[m * N + n] = s;
      }
    }
  });
}

void TernaryInt8::unpack(int8_t* out) const { std::memcpy(out, data_.data(), data_.size()); }

}  // namespace tritium
