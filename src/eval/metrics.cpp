#include "eval/metrics.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"

namespace tritium {

double sample_mean(std::span<const double> x) {
  if (x.empty()) return 0;
  double s = 0;
  for (double v : x) s += v;
  return s / static_cast<double>(x.size());
}

double stderr_of_mean(std::span<const double> x) {
  const size_t n = x.size();
  if (n < 2) return 0;
  const double m = sample_mean(x);
  double ss = 0;
  for (double v : x) ss += (v - m) * (v - m);
  return std::sqrt(ss / static_cast<double>(n - 1)) / std::sqrt(static_cast<double>(n));
}

PerplexityEstimate perplexity_from_loglikelihoods(std::span<const double> ll) {
  PerplexityEstimate e;
  e.value = std::exp(-sample_mean(ll));
  e.std_error = e.value * stderr_of_mean(ll);
  return e;
}

double normal_two_sided_p(double z) { return std::erfc(std::fabs(z) / std::sqrt(2.0)); }

double mcnemar_exact_p(int64_t b, int64_t c) {
  const int64_t n = b + c;
  if (n == 0) return 1;
  const int64_t k = std::min(b, c);
  // P[X <= k], X ~ Binomial(n, 1/2), summed in log space.
  double cdf = 0;
  for (int64_t i = 0; i <= k; ++i) {
    const double lc = std::lgamma(n + 1.0) - std::lgamma(i + 1.0) - std::lgamma(n - i + 1.0);
    cdf += std::exp(lc - static_cast<double>(n) * std::log(2.0));
  }
  return std::min(1.0, 2 * cdf);
}

PairedTest paired_test(std::span<const double> a, std::span<const double> b, bool binary) {
  TRITIUM_CHECK(a.size() == b.size(), "paired test: the runs have {} and {} examples", a.size(), b.size());
  TRITIUM_CHECK(!a.empty(), "paired test: no examples");
  PairedTest t;
  t.n = static_cast<int64_t>(a.size());
  t.mean_a = sample_mean(a);
  t.mean_b = sample_mean(b);
  std::vector<double> d(a.size());
  for (size_t i = 0; i < a.size(); ++i) d[i] = b[i] - a[i];
  t.diff = sample_mean(d);
  t.diff_stderr = stderr_of_mean(d);
  t.z = t.diff_stderr > 0 ? t.diff / t.diff_stderr : 0;
  t.p_value = t.diff_stderr > 0 ? normal_two_sided_p(t.z) : (t.diff == 0 ? 1.0 : 0.0);
  if (binary) {
    for (size_t i = 0; i < a.size(); ++i) {
      const bool ra = a[i] > 0.5, rb = b[i] > 0.5;
      t.a_only += ra && !rb;
      t.b_only += rb && !ra;
    }
    t.mcnemar_p = mcnemar_exact_p(t.a_only, t.b_only);
  }
  return t;
}

}  // namespace tritium
