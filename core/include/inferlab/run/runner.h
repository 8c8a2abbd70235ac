// Turns a parsed experiment into runs: checks every variant's plugins and parameters against
// the registry before any work (plan), then runs variant × repeat and writes the results.
#pragma once
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "inferlab/experiment/experiment.h"
#include "inferlab/plugin/registry.h"
#include "inferlab/formats/checkpoint.h"
#include "inferlab/kv/memory_estimate.h"
#include "inferlab/results/prediction.h"
#include "inferlab/experiment/quantization_rules.h"
#include "inferlab/run/shard.h"

namespace inferlab {

struct ResolvedVariant {
  std::string name;
  Stack stack;
  Params attention, quantization, scheduler, decoding;  // type-checked, defaults filled
  std::optional<ModelSpec> model;  // a substituted model (Variant::model); unset = [model]
  std::string model_where;
  // Per-layer quantization policies (stack.quantization_rules): each rule's parameters checked,
  // defaults filled, and which linears of the variant's model each rule takes (first match wins).
  std::vector<Params> rule_params;
  RuleAssignment rule_assignment;
  // One of the four above, by kind.
  Params& params(PluginKind kind);
  const Params& params(PluginKind kind) const;
};

struct Plan {
  ExperimentSpec spec;
  std::vector<ResolvedVariant> variants;  // [0] = baseline
  int repeats = 1;
  MemoryEstimate memory;  // what the run will hold at most (memory_estimate.h)
};

// Throws Error (with the TOML location) for an unknown plugin, a bad parameter or a variant the
// plugin says it cannot run, and (file:line) for a malformed row of the workload's trace or
// lengths file. `model` is the shape the run will use. Reads no weights. Refuses, with the
// figures, a run whose memory estimate exceeds max_memory_bytes (0 = this machine's memory).
Plan plan_experiment(const ExperimentSpec& spec, const Registry& registry, const ModelConfig& model,
                     std::uint64_t max_memory_bytes = 0);

// The model config an experiment asks for: a preset with overrides, or a checkpoint's header
// (read_model_config: no weights are read).
ModelConfig experiment_model_config(const ModelSpec& spec);
// The simulation options a [device] table with kind = "sim" asks for, for a variant with this
// attention and quantization (a calibrated profile holds one fit per stack; Error when absent).
struct SimOptions;
SimOptions sim_options(const DeviceSpec& device, const std::string& attention, const std::string& quantization);
// ... and, unless the profile is calibrated, what the variant's strategies cost: each linear's
// bytes and arithmetic (sim_linears) and the attention's traffic. Error naming a strategy the
// simulator cannot charge.
SimOptions sim_options(const DeviceSpec& device, const std::string& attention_name, const std::string& quantization_name,
                       const ModelConfig& model, Quantization& quantization, const Attention& attention);
// What a simulated run's device is called in reports.
std::string sim_device_description(const DeviceSpec& device);
// Float weights (and the tokenizer when the checkpoint has one) for the experiment.
LoadedModel load_experiment_model(const ModelSpec& spec);
// A variant's substituted model against the baseline's: throws Error (at `where`) when the
// vocabularies differ, or both carry tokenizers that disagree on any token or on BOS/EOS.
void check_same_tokenizer(const LoadedModel& baseline, const LoadedModel& variant, const std::string& where);

struct RunOptions {
  std::string out_root = "results";
  std::function<double()> clock;  // injected in tests; steady clock otherwise
  std::string resume_dir;         // continue this results folder: run only its missing cells
  // A resumed folder whose config.toml was edited since its cells ran is refused (naming the
  // changed keys) unless this is set; the acceptance is recorded in the manifest.
  bool force_config = false;
  bool check_determinism = false; // rerun each variant's repeat 0 and compare output token hashes
  // Run only this shard's cells (shard.h) into a folder named <stamp>-shard<i>of<n>; a resume
  // takes the shard from the folder's manifest instead.
  Shard shard;
  // A live progress line on stderr (cells done, current cell, elapsed, estimate) instead of the
  // per-cell log line: the CLI sets it when stderr is a terminal.
  bool progress = false;
  // The signal that asks the run to stop (0 = go on); asked between cells and engine steps.
  std::function<int()> interrupted;
  // pred_* columns: each finished cell replayed on the machine's cached calibration
  // (inferlab/results/prediction.h); the CLI sets the cache folder and the clock's name.
  PredictOptions predict;
};

struct RunOutcome {
  std::string dir;         // the results folder
  std::size_t rows = 0;    // variant × repeat rows written
  std::size_t failed = 0;  // of them, rows whose variant failed
  std::size_t ran = 0;     // cells run by this call (a resume runs only the missing ones)
  std::size_t nondeterministic = 0;  // --check-determinism: variants whose rerun differed
  int interrupted = 0;     // the signal that stopped the run before every cell was done
};

// Throws, naming `where` and the reason, unless a CUDA device is visible to this process; run
// and validate call it for a [device] kind = "cuda" plan. Does not initialise CUDA here.
void require_visible_cuda(const std::string& where);

// Runs the plan into a fresh results folder (or the missing cells of options.resume_dir). Each
// cell runs in a child process when spec.isolate. A failing variant is a failed row, not a
// throw; errors before the first row (weights, workload) throw Error. The manifest's "run" block
// and the summary say whether the run is complete, interrupted or failed (with the reason: a
// full disk, a crash of this process) and which cells are done. The folder's lock is held
// throughout (run_folder.h): a second run on the same folder throws Error naming the holder.
RunOutcome run_plan(const Plan& plan, const Registry& registry, const RunOptions& options);

}  // namespace inferlab
