// Which layers a forward pass runs, per token: static layer skipping (a fixed set of layers does
// no compute and holds no K/V) and confidence-based early exit (CALM: Schuster et al., "Confident
// Adaptive Language Modeling", NeurIPS 2022). A decoding strategy owns a LayerPlan and hands it
// to the model it runs on (Decoder::layer_plan, Model::set_layer_plan); the engine's forward
// passes and the teacher-forced quality evaluation then run the model exactly as the strategy
// does. The plan also counts where logit rows exited, for the mean_exit_layer metric.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "inferlab/results/metrics.h"

namespace inferlab {

enum class ExitCriterion { kMaxProb, kMargin };
// "max_prob" (largest softmax probability) or "margin" (top-1 minus top-2 probability).
bool parse_exit_criterion(const std::string& text, ExitCriterion& out);

struct LayerPlan {
  // [n_layers] or empty: skip[l] = layer l is never run (no compute, no K/V slot in the pool).
  std::vector<bool> skip;
  // Ascending layer indices after which a logit row may exit (empty = no early exit). A row
  // exits after layer l when confidence(final_norm + classifier of its hidden state) >=
  // threshold; its logits are those, and every layer above l still gets K/V for its position,
  // computed from the hidden state it exited with (CALM's state propagation), so later tokens
  // attend to a complete cache. Rows that are not logit rows (prompt tokens) run every layer.
  std::vector<int> exit_after;
  double threshold = 1.0;  // in (0, 1]
  ExitCriterion criterion = ExitCriterion::kMaxProb;

  // Counters over every logit row the plan's model produced since the last reset.
  long long logit_rows = 0;    // rows that produced logits
  long long exited_rows = 0;   // of them, rows that left before the last layer
  double layers_run_sum = 0;   // layers each row ran before its logits (1-based depth)
  void reset_counters() { logit_rows = exited_rows = 0; layers_run_sum = 0; }
  bool skips(int layer) const {
    return static_cast<std::size_t>(layer) < skip.size() && skip[static_cast<std::size_t>(layer)];
  }
  bool has_exits() const { return !exit_after.empty(); }
  int active_layers(int n_layers) const;  // layers not skipped
};

// Confidence of one row of logits [vocab] under `criterion` (softmax at temperature 1).
double exit_confidence(const float* logits, int vocab, ExitCriterion criterion);

// A comma-separated list of layer indices ("3, 4,7"; "" = none) checked against a model of
// n_layers: duplicates, negatives and indices >= n_layers are errors naming `what` and the
// allowed range. Returns them ascending.
std::vector<int> parse_layer_list(const std::string& text, int n_layers, const std::string& what);

// The plan's metrics for a run's row: layers_active (layers not skipped) and, with early exit,
// mean_exit_layer (mean 1-based depth at which logit rows took their logits; n_layers for rows
// that never exited) and exit_early_frac (share of logit rows that exited before the top).
void add_layer_plan_metrics(const LayerPlan& plan, int n_layers, MetricRow& row);

}  // namespace inferlab
