// tritium eval: activation outlier statistics of linear-layer inputs (LLM.int8(), Dettmers et al.
// 2022, section 4.1), the computation behind `tritium outliers`.
//
// Feed it, for each text, the input x [T, K] of every linear layer (one call per layer). It keeps
// per layer and per input column the max |x| and the number of tokens with |x| >= alpha, a
// histogram of the per-column max |x|, and, per feature dimension, the set of layers and sequence
// positions where |x| >= alpha occurs. The paper's rule then names the outlier feature dimensions:
//   a column c of width-K inputs is an outlier feature when |x[t, c]| >= alpha
//     - in at least min_layer_fraction (25%) of the layers whose input width is K, and
//     - at at least min_position_fraction (6%) of the sequence positions, counting a position when
//       any of those layers has |x| >= alpha there (the union over layers).
// Layers are grouped by input width K (hidden-size inputs such as q/k/v/gate/up projections vs
// intermediate-size inputs of down projections), since a column index means a feature only among
// layers of one width.
// A suggested alpha comes from the natural break in the sorted per-column max |x| (see report()).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace tritium {

/// The paper's outlier criterion.
struct OutlierRule {
  float alpha = 6.0f;                   ///< magnitude threshold (|x| >= alpha)
  double min_layer_fraction = 0.25;     ///< share of same-width layers affected
  double min_position_fraction = 0.06;  ///< share of sequence positions affected
};

/// Statistics of one linear layer's input over all texts seen.
struct LayerOutlierStats {
  std::string name;
  int64_t k = 0;                     ///< input width
  int64_t tokens = 0;                ///< rows of x seen
  std::vector<float> col_max;        ///< [K] max |x| of each column
  std::vector<int64_t> col_count;    ///< [K] tokens with |x| >= alpha in each column
  int64_t outlier_values = 0;        ///< entries with |x| >= alpha
  int64_t outlier_columns = 0;       ///< columns whose max |x| >= alpha
  std::vector<int64_t> histogram;    ///< per-column max |x| counts over OutlierCollector::histogram_edges()
};

/// A feature dimension that satisfies the rule.
struct OutlierFeature {
  int64_t k = 0;                 ///< input width of the layers it belongs to
  int32_t column = 0;            ///< feature dimension
  double layer_fraction = 0;     ///< affected layers / layers of width k
  double position_fraction = 0;  ///< affected positions / positions seen
  float max_abs = 0;             ///< largest |x| over all layers
};

/// Everything report() derives.
struct OutlierReport {
  OutlierRule rule;
  std::vector<LayerOutlierStats> layers;  ///< in first-seen order
  std::vector<OutlierFeature> features;   ///< sorted by (k, column)
  int64_t positions = 0;                  ///< sequence positions seen (sum over texts)
  float suggested_alpha = 0;              ///< from the natural break, else rule.alpha
  bool alpha_from_break = false;          ///< whether a break (ratio >= 2) was found
  float break_above = 0, break_below = 0; ///< the per-column max values on both sides of the break
};

/// Accumulates statistics; not thread-safe (call from the thread running the model).
class OutlierCollector {
 public:
  explicit OutlierCollector(OutlierRule rule = {});

  /// Starts a new text. Positions of the following add() calls are that text's tokens 0..T-1,
  /// the same positions for every layer. Calling add() before any begin_text() starts one.
  void begin_text();
  /// Records the input x float32 [T, K] (row-major, one row per token) of linear layer `layer`.
  /// A layer name must keep its width K; the text's position count is the largest T seen in it.
  /// Throws tritium::Error on a width change,
  /// T < 0, K <= 0 or a non-finite value.
  void add(std::string_view layer, const float* x, int64_t T, int64_t K);

  /// Applies the rule and finds the suggested alpha: the per-column max |x| of all layers, sorted
  /// descending; among the top 5% (at least the first pair) the consecutive pair with the largest
  /// ratio hi / lo (lo > 0) is the break; when that ratio is >= 2 the suggestion is the geometric
  /// mean sqrt(hi * lo), otherwise rule.alpha.
  OutlierReport report() const;

  /// Bin edges of LayerOutlierStats::histogram: bin i holds edges[i] <= max|x| < edges[i+1], the
  /// last bin is open-ended. Powers of two from 1/16 to 1024 after a first bin [0, 1/16).
  static const std::vector<float>& histogram_edges();

  const OutlierRule& rule() const { return rule_; }

 private:
  struct Feature {  // per (width, column): affected layers and positions
    std::vector<bool> layers;     // indexed by layer id
    std::vector<bool> positions;  // indexed by global position
    float max_abs = 0;
  };
  OutlierRule rule_;
  std::vector<LayerOutlierStats> layers_;
  std::map<std::string, size_t, std::less<>> layer_index_;
  std::map<std::pair<int64_t, int32_t>, Feature> features_;
  int64_t text_offset_ = 0;  // first global position of the current text
  int64_t text_len_ = 0;     // positions in the current text so far
  bool in_text_ = false;
};

}  // namespace tritium
