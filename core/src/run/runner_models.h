// Internal to core/src/runner*.cpp: the model checks plan_experiment shares with the loaders.
#pragma once
#include "inferlab/run/runner.h"

namespace inferlab {

// An fp32 model of `spec`'s preset (shape c) must fit in this machine's memory; throws Error.
void check_preset_fits(const ModelSpec& spec, const ModelConfig& c);
// A [[variant]] model's config, checked against the baseline's: the same vocabulary, a real
// device (not "sim"), a preset that fits. Throws Error at the variant's model key.
ModelConfig substituted_model_config(const ExperimentSpec& spec, const Variant& v, const ModelConfig& baseline);

}  // namespace inferlab
