// Predicted beside measured: every cell of a real run is replayed, once it has finished and
// outside its timed region, through the simulator with this machine's calibrated cost model
// (`inferlab calibrate`, inferlab/sim/sim_cost_model.h) — the same requests (arrival times, prompt
// and output lengths, priorities), the same scheduler, decoder and KV configuration, the pool
// the real cell used — and the cell's row gets pred_<metric> and pred_<metric>_err columns
// beside the measured ones. Calibrations are cached per machine (CPU model, threads, clock and
// model shape), as the bench's read-bandwidth probe is; without one a run says so once and
// writes no pred_* column (a profile is never made up). docs/simulation.md, docs/results.md.
#pragma once
#include <array>
#include <cstddef>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "inferlab/device/device.h"
#include "inferlab/model/model_config.h"
#include "inferlab/sim/sim_cost_model.h"
#include "inferlab/model/weights.h"
#include "inferlab/workload/workload.h"

namespace inferlab {

struct CellResult;
struct Plan;
struct ResultRow;
class Registry;

// The measured metrics each get a prediction, in column order.
inline constexpr std::array<const char*, 5> kPredictedMetrics = {"ttft_ms_p50", "ttft_ms_p99", "tpot_ms_p50",
                                                                 "tpot_ms_p99", "throughput_out_tok_s"};
// "pred_" + metric: the simulator's value, in the metric's unit.
std::string predicted_name(const std::string& metric);
// "pred_" + metric + "_err": (predicted − measured) / measured (absent when measured is 0).
std::string prediction_error_name(const std::string& metric);
// A variant whose mean |TPOT p50 error| exceeds this is flagged in summary.md and report.html.
inline constexpr double kPredictionFlagError = 0.20;

// ---- the calibration cache ------------------------------------------------------------------

// $XDG_CACHE_HOME/inferlab/calibration, else ~/.cache/inferlab/calibration; "" when neither
// variable is set.
std::string default_calibration_cache();
// The one file in `dir` for fits of `machine` (the CPU model string, or a GPU's name) with
// `threads` threads, timed by `clock`, on `model`'s shape.
std::string calibration_cache_file(const std::string& dir, const std::string& machine, int threads,
                                   const std::string& clock, const ModelConfig& model);
// Adds `fit`'s stacks to its key's file in `dir` (a stack the file has is replaced, others are
// kept: calibrating a second experiment adds its stacks). Returns the file. Error when it
// cannot be written.
std::string store_calibration(const std::string& dir, const CalibratedCostModel& fit);
// The cached fit for this key, or nullopt (no file, or a file of another key). Error for a
// malformed file (read_cost_model's, with its line).
std::optional<CalibratedCostModel> find_calibration(const std::string& dir, const std::string& machine, int threads,
                                                    const std::string& clock, const ModelConfig& model);

// ---- predicting a run's cells ---------------------------------------------------------------

struct PredictOptions {
  bool enabled = true;      // run --no-predict: false
  std::string cache_dir;    // where calibrations are looked up ("" = none: the run says so)
  std::string clock = "wall";  // the run's step clock (run --clock): a fit predicts its own clock only
};

// What a CPU (or CUDA) run's timings belong to: the calibration key. CPU: the CPU model and the
// device's threads (0 = every hardware thread). CUDA: the GPU's name as the driver reports it
// (threads 0) — a calibrated GPU profile in the cache plugs in there; `inferlab calibrate`
// times the CPU executor only.
struct PredictionTarget {
  std::string machine;
  int threads = 0;
  std::string clock;
};
PredictionTarget prediction_target(DeviceKind kind, int threads, const std::string& clock);

class CellPredictor {
 public:
  // Looks up the cached calibration of `plan`'s device, model and clock, and decides which
  // variants it can predict (a variant it cannot is logged once, with the reason: a stack the
  // fit lacks, a drafting or layer-skipping decoder, per-layer quantization rules, a KV dtype
  // other than f32, a substituted model). Logs once when there is no calibration (naming how to
  // make one). Inactive for a simulated run and with options.enabled false.
  CellPredictor(const Plan& plan, const Registry& registry, const PredictOptions& options, const ModelConfig& model,
                DeviceKind kind, const std::vector<Request>& requests);
  ~CellPredictor();
  bool active() const { return fit_.has_value(); }
  const std::string& calibration_file() const { return file_; }
  // For an ok cell of a predictable variant: replays the cell's workload through the
  // calibrated simulator and appends pred_* and pred_*_err to cell.row.metrics. A replay that
  // throws is logged (once per variant) and adds nothing; the cell itself is never failed.
  void add(std::size_t variant, CellResult& cell);

 private:
  const Plan& plan_;
  const Registry& registry_;
  ModelWeights shape_;              // the model's config only: the simulator needs no weights
  std::vector<Request> requests_;   // the run's requests, token ids folded into the simulator's vocabulary
  std::optional<CalibratedCostModel> fit_;
  std::string file_;
  std::vector<std::shared_ptr<const CalibratedStack>> stacks_;  // per variant; null = not predicted
  std::vector<bool> failed_;        // a replay of this variant threw (said once)
};

// ---- showing predictions --------------------------------------------------------------------

struct PredictedMetric {
  std::string metric;
  // Means over the variant's ok repeats (NaN: none), and predicted / measured − 1 of them.
  double measured = 0, predicted = 0, error = 0;
};
struct VariantPrediction {
  std::string variant;
  std::vector<PredictedMetric> metrics;  // kPredictedMetrics the rows hold, in that order
  bool flagged = false;                  // |TPOT p50 error| > kPredictionFlagError
};
// Per variant (in `variants` order) with pred_* values: `values` is variant -> metric -> the
// ok repeats' values (metrics.csv read back, or a run's rows). Empty when no row was predicted.
std::vector<VariantPrediction> summarize_predictions(
    const std::vector<std::string>& variants,
    const std::map<std::string, std::map<std::string, std::vector<double>>>& values);
// summary.md's "## Predicted vs measured" section for these rows ("" when none has pred_*).
std::string prediction_markdown(const std::vector<std::string>& variants, const std::vector<ResultRow>& rows);

}  // namespace inferlab
