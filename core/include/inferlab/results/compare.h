// `inferlab compare RUN_A RUN_B`: per variant and metric, both runs' means with 95% CIs, the ratio
// B/A and a Welch t-test. A change is flagged when p < 0.05 (two-sided Welch t-test, both runs
// with >= 2 ok repeats); with a single repeat on either side nothing is tested or flagged.
#pragma once
#include <cstddef>
#include <map>
#include <string>
#include <vector>

namespace inferlab {

// A results folder's metrics.csv: ok rows only, metric columns in file order.
struct MetricTable {
  std::vector<std::string> variants;  // in file (run) order
  std::vector<std::string> metrics;   // numeric metric columns in file order
  std::map<std::string, std::map<std::string, std::vector<double>>> values;  // variant -> metric -> repeats
  bool has_tokens_hash = false;                                 // the tokens_hash column exists
  std::map<std::string, std::vector<std::string>> tokens_hash;  // variant -> ok repeats' hashes
};
// Throws Error when the folder has no readable metrics.csv.
MetricTable read_metric_table(const std::string& run_dir);

// Two-sided p-value of Welch's t-test (unequal variances; Welch–Satterthwaite degrees of
// freedom). NaN when either side has < 2 values; with zero variance on both sides, 1 for equal
// means and 0 otherwise.
double welch_p_value(const std::vector<double>& a, const std::vector<double>& b);

struct Comparison {
  std::string variant, metric;
  std::size_t n_a = 0, n_b = 0;
  double mean_a = 0, half_a = 0, mean_b = 0, half_b = 0;  // mean ± 95% CI half-width
  double ratio = 0;  // mean_b / mean_a (NaN when mean_a is 0)
  double p = 0;      // welch_p_value (NaN when untested)
  bool flagged = false;
  // metric tokens_hash: each side's distinct hashes ("a, b"); flagged when the sets differ.
  std::string hashes_a, hashes_b;
};
// Every variant in both runs (A's order) × each metric (empty = the summary's headline metrics
// that either run records as non-zero). "tokens_hash" compares the output tokens' hashes:
// changed when the two runs' sets of hashes differ (no mean, ratio or test).
std::vector<Comparison> compare_runs(const MetricTable& a, const MetricTable& b, const std::vector<std::string>& metrics);
// status_a/b: said beside a run that did not complete ("" = complete).
std::string comparison_markdown(const std::string& run_a, const std::string& run_b, const std::vector<Comparison>& rows,
                                const std::string& status_a = "", const std::string& status_b = "");

}  // namespace inferlab
