// TernaryLinear's group scales: held as fp16 when every scale is exactly an fp16 value (GGUF Q2_0), else as
// float32 (post-training quantization's absmean scales), with the same outputs as the float32 layer either way.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "formats/ternary_format.h"
#include "model/linear.h"
#include "test_util.h"

using namespace tritium;

namespace {

std::vector<float> run(const TernaryLinear& l, const std::vector<float>& x, int64_t M) {
  std::vector<float> y(static_cast<size_t>(M * l.out_features()));
  l.forward(x.data(), M, y.data());
  return y;
}

}  // namespace

TEST(TernaryLinear, GroupScalesHeldAsFp16OnlyWhenExact) {
  std::mt19937 rng(3);
  const int64_t n = 40, k = 384, G = 3, M = 5;
  const auto w = test::random_ternary(n, k, 0.4, rng);
  std::uniform_real_distribution<float> u(0.001f, 0.05f), xu(-2.0f, 2.0f);
  std::vector<float> exact(static_cast<size_t>(n * G)), inexact(exact.size()), x(static_cast<size_t>(M * k));
  for (size_t i = 0; i < exact.size(); ++i) {
    inexact[i] = u(rng);
    exact[i] = f16_to_f32(f32_to_f16(inexact[i]));
  }
  inexact[7] = std::nextafter(exact[7], 1.0f);  // one scale fp16 cannot hold
  for (auto& v : x) v = xu(rng);
  const TernaryLinear a(pack_ternary(TernaryFormat::kI2, w.data(), n, k), exact);
  const TernaryLinear b(pack_ternary(TernaryFormat::kI2, w.data(), n, k), inexact);
  const size_t padded = static_cast<size_t>((n + 15) / 16 * 16 * G);
  EXPECT_EQ(a.group_scale_bytes(), 2 * padded);
  EXPECT_EQ(b.group_scale_bytes(), 4 * padded);
  EXPECT_EQ(a.group_scales(), exact);
  EXPECT_EQ(b.group_scales(), inexact);
  // The fp16-held layer computes what a float32-held layer over the same values does: the same bits.
  std::vector<float> exact_but_one = exact;
  exact_but_one[7] = inexact[7];
  const TernaryLinear c(pack_ternary(TernaryFormat::kI2, w.data(), n, k), exact_but_one);  // float32-held
  const auto ya = run(a, x, M), yc = run(c, x, M);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t r = 0; r < n; ++r) {
      if (r == 7 / G) continue;  // the row whose scale differs
      ASSERT_EQ(ya[m * n + r], yc[m * n + r]) << "m " << m << " row " << r;
    }
}
