// The keys an experiment file accepts, table by table: the one list the parser checks a file
// against (an unknown key is an error listing these) and docs/experiment-format.md documents.
// tests/core/test_experiment_keys.cpp holds the doc and this list equal, and walks every key
// over every device kind: each one either changes the resolved config or is refused.
#pragma once
#include <string>
#include <vector>

#include "inferlab/experiment/experiment.h"

namespace inferlab {

struct ExperimentTable {
  // "file" (the top-level tables), "experiment", "model", "device", "workload", "length"
  // (workload.prompt_len / output_len as a table), "slo", "quality", "calibration", "plugins",
  // "stack" ([baseline]), "variant" ([[variant]]: its own keys and a stack's), "kv", "rule" (one
  // entry of a quantization table's `rules`). [claim] belongs to `inferlab reproduce`
  // (reproduce.h), which checks its own keys; [sweep] keys are stack keys.
  std::string name;
  std::vector<std::string> keys;
};

// Every table; each table's keys in the order an unknown-key error lists them.
const std::vector<ExperimentTable>& experiment_tables();
// One table's keys; throws Error for a table not in experiment_tables().
const std::vector<std::string>& experiment_keys(const std::string& table);

// A results folder's config.toml (`run --resume`): load_experiment without the refusal of keys
// that do nothing where they land. A config written before those refusals existed holds such
// keys (a fixed length with min and max, prefix_block_tokens without a trace, ...); they did
// nothing in that run and do nothing in its resume.
ExperimentSpec load_resolved_config(const std::string& path);

}  // namespace inferlab
