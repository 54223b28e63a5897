#include "formats/q6_rows.h"

#include <algorithm>
#include <cmath>

#include "core/dtype.h"
#include "core/error.h"
#include "core/parallel.h"

namespace tritium {

namespace {

// The largest finite fp16 value: a scale above it would round to infinity.
constexpr float kF16Max = 65504.0f;

// Round to nearest, ties to even, for |v| < 2^22 (the default rounding mode; unlike std::nearbyint, the compiler
// vectorizes it).
inline float round_even(float v) { return (v + 12582912.0f) - 12582912.0f; }  // 1.5 * 2^23

// Groups whose scales are searched side by side: the loops below run over them innermost (one SIMD lane each).
constexpr int kLanes = 16;

// The fp16 scales of up to kLanes groups (see the header): wt[j][lane] is column j of the group in that lane,
// amax[lane] its absmax (0 for an unused lane, whose scale is 0). Each candidate's error is that of its own codes
// L, |w - s L|^2 = sum w^2 - 2 s sum(w L) + s^2 sum(L^2); the codes stored, clamp(round(w / s)), are at least as
// close.
void search_scales(const float (&wt)[kQ6Group][kLanes], const float (&amax)[kLanes], uint16_t (&out)[kLanes]) {
  float inv[kLanes], swl[kLanes], sll[kLanes], sw2[kLanes] = {};
  double best_err[kLanes];
  for (int j = 0; j < kQ6Group; ++j)
    for (int l = 0; l < kLanes; ++l) sw2[l] += wt[j][l] * wt[j][l];
  // The sums of w L and L^2 for the codes L = clamp(round(w inv), -31, 31) of every lane, in 4-float GCC / Clang
  // vector types (SSE registers on every x86-64; the compiler keeps a plain loop's selects as branches).
  typedef float F4 __attribute__((vector_size(16)));
  constexpr int kVecs = kLanes / 4;
  auto fit = [&] {
    F4 iv[kVecs], a[kVecs] = {}, b[kVecs] = {};
    __builtin_memcpy(iv, inv, sizeof iv);
    const F4 lo = F4{} - 31.0f, hi = F4{} + 31.0f, magic = F4{} + 12582912.0f;
    for (int j = 0; j < kQ6Group; ++j)
      for (int h = 0; h < kVecs; ++h) {
        F4 v;
        __builtin_memcpy(&v, &wt[j][4 * h], sizeof v);
        F4 c = (v * iv[h] + magic) - magic;  // round_even, lane by lane
        c = c > lo ? c : lo;  // the operand order of maxps / minps
        c = c < hi ? c : hi;
        a[h] += v * c;
        b[h] += c * c;
      }
    __builtin_memcpy(swl, a, sizeof a);
    __builtin_memcpy(sll, b, sizeof b);
  };
  auto error = [&](int l, float s) {
    return static_cast<double>(sw2[l]) - 2.0 * s * swl[l] + static_cast<double>(s) * s * sll[l];
  };
  // Candidate 0: absmax / 31 in fp16.
  for (int l = 0; l < kLanes; ++l) {
    out[l] = f32_to_f16(amax[l] / 31.0f);
    const float s = f16_to_f32(out[l]);
    inv[l] = s > 0.0f ? 1.0f / s : 0.0f;
  }
  fit();
  for (int l = 0; l < kLanes; ++l) best_err[l] = error(l, f16_to_f32(out[l]));
  // Candidates d around 31: the least-squares scale of the codes of w d / absmax (ggml searches 19 values of d in
  // steps of 0.1; these 6 reach 98% of the error reduction of those 18 on the tiny-bitnet head at a third of the
  // time).
  for (const float d : {30.1f, 30.4f, 30.7f, 31.3f, 31.6f, 31.9f}) {
    for (int l = 0; l < kLanes; ++l) inv[l] = amax[l] > 0.0f ? d / amax[l] : 0.0f;
    fit();
    for (int l = 0; l < kLanes; ++l) {
      if (f16_to_f32(out[l]) == 0.0f) continue;  // absmax / 31 is 0 in fp16: every code is 0
      const uint16_t s16 = f32_to_f16(swl[l] / sll[l]);
      const float s = f16_to_f32(s16);
      if (!(s > 0.0f) || !std::isfinite(s)) continue;
      const double e = error(l, s);
      if (e < best_err[l]) {
        best_err[l] = e;
        out[l] = s16;
      }
    }
  }
}

}  // namespace

Q6Rows quantize_q6_rows(const float* w, int64_t n, int64_t k) {
  TRITIUM_CHECK(n > 0 && k > 0, "q6: shape [{}, {}] must be positive", n, k);
  TRITIUM_CHECK(k % 64 == 0, "q6: the input width {} must be a multiple of 64", k);
  Q6Rows q;
  q.n = n;
  q.k = k;
  const int64_t rb = q.row_bytes(), G = k / kQ6Group;
  q.codes.assign(static_cast<size_t>(n * rb), 0);
  q.scales.assign(static_cast<size_t>(n * G), 0);
  parallel_for(n, 64, [&](int64_t n0, int64_t n1) {
    std::vector<uint8_t> u(static_cast<size_t>(k));
    for (int64_t r = n0; r < n1; ++r) {
      const float* wr = w + r * k;
      for (int64_t g0 = 0; g0 < G; g0 += kLanes) {
        const int lanes = static_cast<int>(std::min<int64_t>(kLanes, G - g0));
        float wt[kQ6Group][kLanes] = {}, amax[kLanes] = {};
        for (int l = 0; l < lanes; ++l)
          for (int64_t j = 0; j < kQ6Group; ++j) {
            const int64_t c = (g0 + l) * kQ6Group + j;
            const float v = wr[c];
            if (!std::isfinite(v)) fail("q6: weight [{}, {}] is not finite", r, c);
            wt[j][l] = v;
            amax[l] = std::max(amax[l], std::fabs(v));
          }
        for (int l = 0; l < lanes; ++l)
          if (amax[l] / 31.0f > kF16Max)
            fail("q6: weights of row {}, columns {}.. exceed the fp16 scale range", r, (g0 + l) * kQ6Group);
        uint16_t s16[kLanes];
        search_scales(wt, amax, s16);
        for (int l = 0; l < lanes; ++l) {
          const int64_t g = g0 + l;
          const float s = f16_to_f32(s16[l]);
          q.scales[r * G + g] = s16[l];
          for (int64_t j = 0; j < kQ6Group; ++j) {
            float c = s > 0.0f ? std::nearbyint(wr[g * kQ6Group + j] / s) : 0.0f;
            c = std::clamp(c, -31.0f, 31.0f);
            u[g * kQ6Group + j] = static_cast<uint8_t>(static_cast<int>(c) + 32);
          }
        }
      }
      uint8_t* cr = q.codes.data() + r * rb;
      for (int64_t b = 0; b < k / 64; ++b) {
        const uint8_t* ub = u.data() + 64 * b;
        uint8_t* blk = cr + 48 * b;
        for (int j = 0; j < 32; ++j) blk[j] = static_cast<uint8_t>((ub[j] & 15) | ((ub[32 + j] & 15) << 4));
        for (int j = 0; j < 16; ++j)
          blk[32 + j] = static_cast<uint8_t>((ub[j] >> 4) | ((ub[16 + j] >> 4) << 2) | ((ub[32 + j] >> 4) << 4) |
                                             ((ub[48 + j] >> 4) << 6));
      }
    }
  });
  return q;
}

std::vector<float> Q6Rows::dequantize() const {
  std::vector<float> out(static_cast<size_t>(n * k));
  const int64_t G = k / kQ6Group, rb = row_bytes();
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < k; ++c)
      out[r * k + c] = static_cast<float>(q6_code(codes.data() + r * rb, c)) * f16_to_f32(scales[r * G + c / kQ6Group]);
  return out;
}

void validate_q6_rows(const Q6Rows& q, const char* what) {
  if (q.n <= 0 || q.k <= 0 || q.k % 64 != 0)
    fail("{}: q6 shape [{}, {}] is invalid (K must be a multiple of 64)", what, q.n, q.k);
  if (q.codes.size() != static_cast<size_t>(q.n * q.row_bytes()))
    fail("{}: q6 codes hold {} bytes, expected {}", what, q.codes.size(), q.n * q.row_bytes());
  if (q.scales.size() != static_cast<size_t>(q.n * q.k / kQ6Group))
    fail("{}: q6 scales hold {} values, expected {}", what, q.scales.size(), q.n * q.k / kQ6Group);
}

}  // namespace tritium
