// A calibrated step cost model (`inferlab calibrate`, docs/simulation.md): per time category,
// a linear model of one engine step's seconds in a few batch features, fitted to the real
// executor's measured times on this machine. Cost models are data (Vidur): the fit is written
// to a TOML file and a simulated run reads it with `[device] profile = "calibrated:PATH"`.
#pragma once
#include <array>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "inferlab/engine/batch.h"
#include "inferlab/plugin/decoder.h"
#include "inferlab/device/device.h"
#include "inferlab/model/model_config.h"

namespace inferlab {

class StepExecutor;
class Registry;
struct Plan;

// `[device] profile = "calibrated:PATH"` names a cost model file instead of a hardware profile.
inline constexpr std::string_view kCalibratedProfile = "calibrated:";
inline bool is_calibrated_profile(const std::string& profile) { return profile.rfind(kCalibratedProfile, 0) == 0; }

// The features a step's cost is linear in: a fixed per-step cost, rows (tokens run), attended
// keys (Σ over rows of the keys the row attends to: context × tokens, the attention's
// arithmetic), rows asking for logits (classifier and sampling), and keys read (Σ over
// sequences of their context: the K/V a step streams from the cache, once per sequence however
// many query rows share it). The last splits decode from prefill attention: a decode row reads
// its keys from memory, a prefill's rows reuse them from cache (measured on stories15m, naive
// attention: one attended_keys coefficient for both gave a fit error of 17% rms, decode steps
// at long contexts -32%, 256-token prefills +20%).
inline constexpr int kCostFeatures = 5;
inline constexpr std::array<const char*, kCostFeatures> kCostFeatureNames = {"step", "rows", "attended_keys", "logit_rows",
                                                                             "keys_read"};
using CostFeatures = std::array<double, kCostFeatures>;
CostFeatures step_features(const StepBatch& batch);

// One plugin stack's fit: seconds = Σ coef[category][feature] × feature, per category.
struct CalibratedStack {
  std::string attention, quantization;  // plugin names the fit was measured with
  double kv_bytes_per_token = 0;        // the executor's K/V storage (sizes the pool as the real run does)
  double weight_bytes = 0;              // the model's weights as the real run stores them
  double block_copy_s = 0;              // one copy-on-write block copy (every layer's K and V)
  std::array<CostFeatures, kTimeCategories> coef{};  // [category][feature] seconds per unit
  int points = 0;                       // grid points fitted
  double fit_rms_rel_error = 0;         // of the total step time over the grid
  // The modelled seconds of each category for this batch (never negative).
  std::array<double, kTimeCategories> seconds(const StepBatch& batch) const;
  double total(const CostFeatures& f) const;
};

struct CalibratedCostModel {
  // The model shape it was measured on (a simulated run of another shape is refused).
  std::string model;
  int dim = 0, hidden_dim = 0, n_layers = 0, n_heads = 0, n_kv_heads = 0, vocab_size = 0;
  int threads = 0;        // CPU threads the executor ran with
  std::string machine;    // CPU model string
  std::string clock = "wall";  // what timed the steps: wall, or thread-cpu (see thread_cpu_seconds)
  std::vector<CalibratedStack> stacks;
  // The fit of this stack; Error naming the stacks there are when it is absent.
  const CalibratedStack& stack(const std::string& attention, const std::string& quantization) const;
  // Error when `model` is not the shape the fit was measured on.
  void check_model(const ModelConfig& model, const std::string& where) const;
};

// Reads / writes the TOML file (Error with file:line and what is wrong for a malformed one).
CalibratedCostModel read_cost_model(const std::string& path);
void write_cost_model(const std::string& path, const CalibratedCostModel& model);

// Weighted least squares y ≈ X·c with c ≥ 0: solved on all features, then any feature whose
// coefficient came out negative is dropped (fixed at 0) and the rest refitted, until none is.
// Weights w multiply each row (1/y gives relative errors). Returns c.
CostFeatures fit_nonnegative(const std::vector<CostFeatures>& x, const std::vector<double>& y, const std::vector<double>& w);

// The grid of steps timed: single-sequence prefills of each length, and decode batches of each
// size at each context length (one token per sequence, every row asking for logits).
struct CalibrationGrid {
  // Up to 512: a fit from short prefills alone overestimated a scheduler's 256-token steps
  // (the packed GEMM's per-row cost falls as rows grow; TTFT +10-14% with a 192 maximum).
  std::vector<int> prefill_tokens = {8, 32, 64, 128, 192, 256, 512};
  std::vector<int> decode_batch = {1, 2, 4, 8, 16};
  std::vector<int> context = {16, 64, 128, 192};
  int repeats = 5;  // timings per point; the median is fitted
};
// The grid clipped to the model's context length (positions must stay below max_seq_len).
CalibrationGrid clip_grid(CalibrationGrid grid, const ModelConfig& model);

// CPU seconds of the calling thread. With one CPU thread (device.threads = 1) it is a step's
// cost without the time the OS gave other processes: `inferlab calibrate --clock thread-cpu` and
// `inferlab run --clock thread-cpu` use it so that a calibration and the run it predicts agree
// on a shared, loaded machine (docs/simulation.md).
double thread_cpu_seconds();

// Times `executor` (prepared here with a pool large enough for the grid) and `decoder`'s
// accept on every logit row over the grid, reads the per-category split from the device's op
// timers (time not inside a timed op is framework; the split scaled to the clock's total), and
// fits each category. `clock` is monotonic seconds (steady, or thread_cpu_seconds).
CalibratedStack calibrate_stack(StepExecutor& executor, Decoder& decoder, const CalibrationGrid& grid,
                                const std::function<double()>& clock);

// `inferlab calibrate`: the experiment's model (its weights loaded once) on a CPU device of
// [device] threads, and every distinct (attention, quantization) stack of its variants timed
// over the grid with the variant's decoder, through the ModelExecutor the engine runs.
CalibratedCostModel calibrate_plan(const Plan& plan, const Registry& registry, const CalibrationGrid& grid,
                                   const std::function<double()>& clock);

}  // namespace inferlab
