// Internal to core/src/runner*.cpp: one variant × repeat of a run (a cell), in this process or
// in a child of its own, and what every cell of a run shares.
#pragma once
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "inferlab/model/calibration.h"
#include "inferlab/run/cell.h"
#include "inferlab/results/quality.h"
#include "inferlab/run/runner.h"
#include "inferlab/workload/workload.h"

namespace inferlab {

// What every cell of a run shares.
struct RunContext {
  const Plan& plan;
  const Registry& registry;
  const RunOptions& options;
  const ModelWeights& weights;
  const std::vector<const ModelWeights*>& variant_weights;  // per variant; null = `weights`
  const std::vector<Request>& requests;
  QualityEvaluator* quality;
  DeviceKind device_kind;
  const CalibrationSet* calibration;  // null when no variant calibrates
  bool stopping() const { return options.interrupted && options.interrupted() != 0; }
};

// Variant `vi`, repeat `rep`: in a child process (spec.isolate, `scratch` its hand-over file) or
// here. A failure is a failed row (logged); nullopt when the run was interrupted.
std::optional<CellResult> run_cell_guarded(const RunContext& cx, std::size_t vi, int rep, const std::string& scratch);

}  // namespace inferlab
