// Layer skipping and early exit plans (see inferlab/plugin/layer_plan.h).
#include "inferlab/plugin/layer_plan.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include "inferlab/error.h"

namespace inferlab {

bool parse_exit_criterion(const std::string& text, ExitCriterion& out) {
  if (text == "max_prob") out = ExitCriterion::kMaxProb;
  else if (text == "margin") out = ExitCriterion::kMargin;
  else return false;
  return true;
}

int LayerPlan::active_layers(int n_layers) const {
  int n = 0;
  for (int l = 0; l < n_layers; ++l) n += !skips(l);
  return n;
}

double exit_confidence(const float* logits, int vocab, ExitCriterion criterion) {
  // p_i = exp(z_i - z_max) / sum_j exp(z_j - z_max): the top probability is 1 / sum.
  float z1 = -std::numeric_limits<float>::infinity(), z2 = z1;
  for (int i = 0; i < vocab; ++i) {
    const float z = logits[i];
    if (z > z1) {
      z2 = z1;
      z1 = z;
    } else if (z > z2) {
      z2 = z;
    }
  }
  double sum = 0;
  for (int i = 0; i < vocab; ++i) sum += std::exp(static_cast<double>(logits[i]) - static_cast<double>(z1));
  const double p1 = 1.0 / sum;
  if (criterion == ExitCriterion::kMaxProb) return p1;
  const double p2 = vocab > 1 ? std::exp(static_cast<double>(z2) - static_cast<double>(z1)) / sum : 0.0;
  return p1 - p2;
}

std::vector<int> parse_layer_list(const std::string& text, int n_layers, const std::string& what) {
  std::vector<int> out;
  std::stringstream in(text);
  std::string item;
  const std::string allowed = "allowed: comma-separated distinct layer indices 0.." + std::to_string(n_layers - 1);
  while (std::getline(in, item, ',')) {
    const auto b = item.find_first_not_of(" \t"), e = item.find_last_not_of(" \t");
    if (b == std::string::npos) {
      if (text.find_first_not_of(" \t,") == std::string::npos && out.empty()) continue;  // "" or " "
      throw Error(what + " = \"" + text + "\" has an empty entry; " + allowed);
    }
    const std::string t = item.substr(b, e - b + 1);
    std::size_t used = 0;
    long long v = -1;
    try {
      v = std::stoll(t, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != t.size()) throw Error(what + " = \"" + text + "\": '" + t + "' is not an integer; " + allowed);
    if (v < 0 || v >= n_layers)
      throw Error(what + " names layer " + t + ", but the model has " + std::to_string(n_layers) + " layers; " + allowed);
    if (std::find(out.begin(), out.end(), static_cast<int>(v)) != out.end())
      throw Error(what + " names layer " + t + " twice; " + allowed);
    out.push_back(static_cast<int>(v));
  }
  std::sort(out.begin(), out.end());
  return out;
}

void add_layer_plan_metrics(const LayerPlan& plan, int n_layers, MetricRow& row) {
  row.emplace_back("layers_active", static_cast<double>(plan.active_layers(n_layers)));
  if (!plan.has_exits()) return;
  const double rows = static_cast<double>(plan.logit_rows);
  row.emplace_back("mean_exit_layer", rows > 0 ? plan.layers_run_sum / rows : std::nan(""));
  row.emplace_back("exit_early_frac", rows > 0 ? static_cast<double>(plan.exited_rows) / rows : std::nan(""));
}

}  // namespace inferlab
