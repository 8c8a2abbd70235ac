// Keys that would do nothing where they land (internal to core/src/experiment*.cpp).
#pragma once
#include "inferlab/experiment/tomlpp.h"

#include "experiment/experiment_parse.h"
#include "inferlab/experiment/experiment.h"

namespace inferlab {

// Throws Error at the key's file:line when a key of the parsed file does nothing there: a
// simulation key on a real device, threads on a simulated one, synthetic-request keys beside a
// trace (and trace keys without one), a length key its distribution ignores, a cell limit
// without isolation, a seed, tokenizer or add_bos nothing reads, kv.gpu_memory_fraction off a GPU. The
// message names the key, what makes it inert (the device kind, the trace, ...) and what would
// honour it. Runs once the whole file is parsed; keys that need the plugins ([calibration]
// without a calibrating method) are refused by plan_experiment.
void refuse_inert_keys(const experiment_parse::Ctx& c, const toml::table& root, const ExperimentSpec& spec);

}  // namespace inferlab
