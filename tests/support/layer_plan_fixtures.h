// What the decoding plugin tests (layer_skip, early_exit, speculative) share: three story
// prompts for stories260K,
// and one engine run of a decoding plugin (fp32 weights, reference attention, continuous
// batching) that returns the outputs and, for a strategy with a LayerPlan, its plan metrics.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "inferlab/engine/engine.h"
#include "inferlab/results/metrics.h"
#include "inferlab/plugin/params.h"
#include "inferlab/tokenizer/tokenizer.h"
#include "inferlab/model/weights.h"

namespace inferlab::testing {

// "Once upon a time", "The cat sat on the", "Lily and Tom went to the park and": max_output
// tokens each.
std::vector<Request> story_requests(const Tokenizer& tok, int max_output = 32);

struct DecoderRun {
  RunResult result;
  MetricRow plan_metrics;  // layers_active, mean_exit_layer, exit_early_frac (empty without a plan)
};

DecoderRun run_decoder_plugin(const ModelWeights& w, const std::vector<Request>& reqs, const std::string& decoder,
                              const std::map<std::string, ParamValue>& params);

// The value of `name` in the row; a test failure (and NaN) when it is missing.
double metric_value(const MetricRow& row, const std::string& name);

}  // namespace inferlab::testing
