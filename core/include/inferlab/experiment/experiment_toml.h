// The fully resolved experiment as TOML, written as config.toml into every results folder:
// defaults and every plugin parameter filled in, so loading it again gives the same experiment.
#pragma once
#include <string>

#include "inferlab/run/runner.h"

namespace inferlab {

std::string resolved_config_toml(const Plan& plan);

}  // namespace inferlab
