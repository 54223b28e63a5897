// tritium eval: aggregate metrics with standard errors, and paired significance tests between two runs.
#pragma once

#include <cstdint>
#include <span>

namespace tritium {

/// Arithmetic mean; 0 for an empty sample.
double sample_mean(std::span<const double> x);
/// Standard error of the mean as lm-eval's mean_stderr: sample standard deviation (n - 1 denominator) / sqrt(n).
/// For 0/1 outcomes this is sqrt(p (1 - p) / (n - 1)). 0 when n < 2.
double stderr_of_mean(std::span<const double> x);

/// exp(-mean(loglikelihoods)) and its delta-method standard error exp(-m) * stderr_of_mean(ll).
/// (lm-eval bootstraps this stderr; the delta method is its first-order equivalent and deterministic.)
struct PerplexityEstimate {
  double value = 0, std_error = 0;
};
PerplexityEstimate perplexity_from_loglikelihoods(std::span<const double> ll);

/// Two-sided p-value of a standard normal statistic: erfc(|z| / sqrt(2)).
double normal_two_sided_p(double z);
/// Exact two-sided McNemar (sign) test p-value for b discordant pairs one way and c the other:
/// min(1, 2 * P[Binomial(b + c, 1/2) <= min(b, c)]); 1 when b + c == 0.
double mcnemar_exact_p(int64_t b, int64_t c);

/// Paired comparison of the same examples scored by two runs (B minus A).
struct PairedTest {
  int64_t n = 0;
  double mean_a = 0, mean_b = 0;
  double diff = 0;         ///< mean_b - mean_a
  double diff_stderr = 0;  ///< stderr_of_mean of the per-example differences
  double z = 0;            ///< diff / diff_stderr (0 when the stderr is 0)
  double p_value = 1;      ///< normal two-sided p of z (paired z-test)
  int64_t a_only = 0, b_only = 0;  ///< binary outcomes: examples right only in A / only in B
  double mcnemar_p = 1;            ///< binary outcomes: exact McNemar p
};
/// Throws tritium::Error when the samples differ in length or are empty. `binary`: outcomes are 0/1, so the
/// McNemar counts and p are filled.
PairedTest paired_test(std::span<const double> a, std::span<const double> b, bool binary);

}  // namespace tritium
