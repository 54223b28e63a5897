#include "quant/ternary_ptq.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include "core/error.h"

namespace tritium {
namespace {

void check_weights(const float* w, int64_t n, int64_t k, const char* fn) {
  TRITIUM_CHECK(n > 0 && k > 0, "{}: bad shape [{}, {}]", fn, n, k);
  for (int64_t i = 0; i < n * k; ++i)
    TRITIUM_CHECK(std::isfinite(w[i]), "{}: weight {} (row {}, col {}) is not finite", fn, w[i], i / k, i % k);
}

int8_t ternary_round(float v, float s) {
  if (s == 0.0f) return 0;
  const double r = std::nearbyint(static_cast<double>(v) / static_cast<double>(s));
  return static_cast<int8_t>(r < -1.0 ? -1 : (r > 1.0 ? 1 : r));
}

}  // namespace

std::vector<float> TernaryQuant::dequantize() const {
  std::vector<float> out(static_cast<size_t>(n * k));
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < k; ++c) out[r * k + c] = static_cast<float>(q[r * k + c]) * scale_at(r, c);
  return out;
}

TernaryQuant ternary_absmean(const float* w, int64_t n, int64_t k) {
  check_weights(w, n, k, "ternary_absmean");
  double sum = 0.0;
  for (int64_t i = 0; i < n * k; ++i) sum += std::fabs(static_cast<double>(w[i]));
  const float s = static_cast<float>(sum / static_cast<double>(n * k));
  TernaryQuant out;
  out.n = n;
  out.k = k;
  out.scales = {s};
  out.q.resize(static_cast<size_t>(n * k));
  for (int64_t i = 0; i < n * k; ++i) out.q[i] = ternary_round(w[i], s);
  return out;
}

TernaryQuant ternary_absmean_grouped(const float* w, int64_t n, int64_t k, int64_t group) {
  check_weights(w, n, k, "ternary_absmean_grouped");
  TRITIUM_CHECK(group > 0, "ternary_absmean_grouped: group size {} must be positive", group);
  TernaryQuant out;
  out.n = n;
  out.k = k;
  out.group_size = group;
  const int64_t ng = out.groups_per_row();
  out.scales.resize(static_cast<size_t>(n * ng));
  out.q.resize(static_cast<size_t>(n * k));
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t g = 0; g < ng; ++g) {
      const int64_t c0 = g * group, c1 = std::min(k, c0 + group);
      double sum = 0.0;
      for (int64_t c = c0; c < c1; ++c) sum += std::fabs(static_cast<double>(w[r * k + c]));
      const float s = static_cast<float>(sum / static_cast<double>(c1 - c0));
      out.scales[r * ng + g] = s;
      for (int64_t c = c0; c < c1; ++c) out.q[r * k + c] = ternary_round(w[r * k + c], s);
    }
  }
  return out;
}

float ternary_ls_scale(const float* w, int64_t count, float t) {
  double sum = 0.0;
  int64_t kept = 0;
  for (int64_t i = 0; i < count; ++i) {
    const double a = std::fabs(static_cast<double>(w[i]));
    if (a > t) {
      sum += a;
      ++kept;
    }
  }
  return kept == 0 ? 0.0f : static_cast<float>(sum / static_cast<double>(kept));
}

float ternary_twn_threshold(const float* w, int64_t count) {
  double sum = 0.0;
  for (int64_t i = 0; i < count; ++i) sum += std::fabs(static_cast<double>(w[i]));
  return count == 0 ? 0.0f : static_cast<float>(0.7 * sum / static_cast<double>(count));
}

float ternary_optimal_threshold(const float* w, int64_t count) {
  if (count <= 0) return 0.0f;
  std::vector<float> a(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) a[i] = std::fabs(w[i]);
  std::sort(a.begin(), a.end(), std::greater<float>());
  double prefix = 0.0, best = -1.0;
  int64_t best_j = 0;
  for (int64_t j = 1; j <= count; ++j) {
    prefix += a[j - 1];
    // Only cut between distinct magnitudes (a threshold cannot split equal |w|).
    if (j < count && a[j] == a[j - 1]) continue;
    const double gain = prefix * prefix / static_cast<double>(j);
    if (gain > best) {
      best = gain;
      best_j = j;
    }
  }
  return best_j >= count ? 0.0f : a[best_j];
}

TernaryQuant ternary_threshold(const float* w, int64_t n, int64_t k, float t) {
  check_weights(w, n, k, "ternary_threshold");
  TRITIUM_CHECK(t >= 0.0f && std::isfinite(t), "ternary_threshold: threshold {} must be finite and >= 0", t);
  TernaryQuant out;
  out.n = n;
  out.k = k;
  out.scales = {ternary_ls_scale(w, n * k, t)};
  out.q.resize(static_cast<size_t>(n * k));
  for (int64_t i = 0; i < n * k; ++i) out.q[i] = std::fabs(w[i]) > t ? (w[i] > 0 ? 1 : -1) : 0;
  return out;
}

}  // namespace tritium
