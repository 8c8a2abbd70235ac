// The [workload] table of an experiment file (internal to core/src/experiment*.cpp): a trace or
// synthetic requests, their lengths (a number or a distribution table), limits and timeouts.
#pragma once
#include <string>

#include "inferlab/experiment/tomlpp.h"

#include "experiment/experiment_parse.h"
#include "inferlab/experiment/experiment.h"

namespace inferlab {

// Throws Error at the key's file:line for an unknown key, a value out of range, a length table
// missing a key its distribution needs, or a trace length without a lengths_file.
void parse_workload(const experiment_parse::Ctx& c, const toml::table& t, const std::string& base_dir, WorkloadSpec& w);

}  // namespace inferlab
