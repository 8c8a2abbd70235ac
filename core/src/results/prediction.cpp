// Predicted beside measured (see inferlab/results/prediction.h): the calibration cache, the replay of a
// finished cell through the calibrated simulator, and the tables that show both.
#include "inferlab/results/prediction.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "inferlab/run/cell.h"
#include "inferlab/engine/engine.h"
#include "inferlab/error.h"
#include "inferlab/support/log.h"
#include "inferlab/results/manifest.h"
#include "inferlab/results/metrics.h"
#include "inferlab/results/report.h"
#include "inferlab/support/rng.h"
#include "inferlab/run/runner.h"
#include "inferlab/sim/sim.h"

namespace inferlab {

namespace fs = std::filesystem;

std::string predicted_name(const std::string& metric) { return "pred_" + metric; }
std::string prediction_error_name(const std::string& metric) { return "pred_" + metric + "_err"; }

// ---- the calibration cache ------------------------------------------------------------------

namespace {

// Lower-case letters and digits, every other run of characters one '-'.
std::string slug(const std::string& s) {
  std::string out;
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u)) out += static_cast<char>(std::tolower(u));
    else if (!out.empty() && out.back() != '-') out += '-';
  }
  while (!out.empty() && out.back() == '-') out.pop_back();
  return out.empty() ? "unknown" : out.substr(0, 64);
}

ModelConfig shape_of(const CalibratedCostModel& m) {
  ModelConfig c;
  c.name = m.model;
  c.dim = m.dim, c.hidden_dim = m.hidden_dim, c.n_layers = m.n_layers, c.n_heads = m.n_heads;
  c.n_kv_heads = m.n_kv_heads, c.vocab_size = m.vocab_size;
  return c;
}

bool same_key(const CalibratedCostModel& m, const std::string& machine, int threads, const std::string& clock,
              const ModelConfig& model) {
  if (m.machine != machine || m.threads != threads || m.clock != clock) return false;
  try {
    m.check_model(model, "");
  } catch (const Error&) {
    return false;
  }
  return true;
}

}  // namespace

std::string default_calibration_cache() {
  fs::path base;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) base = xdg;
  else if (const char* home = std::getenv("HOME"); home && *home) base = fs::path(home) / ".cache";
  else return "";
  return (base / "inferlab" / "calibration").string();
}

std::string calibration_cache_file(const std::string& dir, const std::string& machine, int threads,
                                   const std::string& clock, const ModelConfig& model) {
  // The shape's numbers in the name's hash: two checkpoints called alike are two files.
  const std::string shape = std::to_string(model.dim) + "," + std::to_string(model.hidden_dim) + "," +
                            std::to_string(model.n_layers) + "," + std::to_string(model.n_heads) + "," +
                            std::to_string(model.n_kv_heads) + "," + std::to_string(model.vocab_size);
  const std::string name = slug(machine) + "_" + std::to_string(threads) + "t_" + clock + "_" + slug(model.name) + "_" +
                           text_hash(machine + "\n" + shape).substr(0, 8) + ".toml";
  return (fs::path(dir) / name).string();
}

std::string store_calibration(const std::string& dir, const CalibratedCostModel& fit) {
  const ModelConfig shape = shape_of(fit);
  const std::string path = calibration_cache_file(dir, fit.machine, fit.threads, fit.clock, shape);
  CalibratedCostModel merged = fit;
  std::error_code ec;
  if (fs::exists(path, ec)) {
    try {  // the stacks calibrated before and not now are kept
      const CalibratedCostModel old = read_cost_model(path);
      if (same_key(old, fit.machine, fit.threads, fit.clock, shape))
        for (const CalibratedStack& s : old.stacks) {
          const bool again = std::any_of(fit.stacks.begin(), fit.stacks.end(), [&](const CalibratedStack& n) {
            return n.attention == s.attention && n.quantization == s.quantization;
          });
          if (!again) merged.stacks.push_back(s);
        }
    } catch (const Error& e) {
      log::warn(std::string("calibration cache: replacing an unreadable file: ") + e.what());
    }
  }
  fs::create_directories(dir, ec);
  if (ec) throw Error("cannot create the calibration cache " + dir + ": " + ec.message() +
                      "; allowed: a writable folder, or --calibration-cache none");
  const std::string tmp = path + ".tmp";
  write_cost_model(tmp, merged);
  fs::rename(tmp, path, ec);
  if (ec) throw Error("cannot write the calibration cache " + path + ": " + ec.message());
  return path;
}

std::optional<CalibratedCostModel> find_calibration(const std::string& dir, const std::string& machine, int threads,
                                                    const std::string& clock, const ModelConfig& model) {
  const std::string path = calibration_cache_file(dir, machine, threads, clock, model);
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return std::nullopt;
  CalibratedCostModel m = read_cost_model(path);
  if (!same_key(m, machine, threads, clock, model)) return std::nullopt;
  return m;
}

// ---- predicting a run's cells ---------------------------------------------------------------

namespace {

// The GPU's name from the driver's /proc entry (CUDA is not initialised here: the run forks).
std::string gpu_name() {
  std::error_code ec;
  for (const auto& gpu : fs::directory_iterator("/proc/driver/nvidia/gpus", ec)) {
    std::ifstream info(gpu.path() / "information");
    for (std::string line; std::getline(info, line);)
      if (line.rfind("Model:", 0) == 0) return line.substr(line.find_first_not_of(" \t", 6));
  }
  return "unknown gpu";
}

double metric_value(const MetricRow& row, const std::string& name) {
  for (const auto& [k, v] : row)
    if (k == name) return v;
  return NAN;
}

// Why `v` cannot be replayed with a fit of (attention, quantization) ("" = it can).
std::string refusal(const ResolvedVariant& v, const CalibratedCostModel& fit, const Registry& registry,
                    const ModelWeights& shape) {
  if (v.model) return "it has its own model (" + v.model_where + "); inferlab calibrate times [model] only";
  if (!v.stack.quantization_rules.empty())
    return "its per-layer quantization rules are not what a calibrated stack (attention + quantization) records";
  if (!v.stack.kv.format.all_f32())
    return "kv.dtype '" + v.stack.kv.format.name() + "': a calibrated stack is keyed by attention and quantization only";
  try {
    fit.stack(v.stack.attention.name, v.stack.quantization.name);
    SimDevice device;
    auto attention = registry.create_attention(v.stack.attention.name, v.attention, device);
    auto decoder = registry.create_decoder(v.stack.decoding.name, v.decoding, device, &shape, attention.get());
    if (decoder->max_draft_tokens() > 0)
      return "decoding '" + v.stack.decoding.name + "' drafts: its acceptance depends on the model's tokens, which "
             "the simulator does not have";
    if (decoder->layer_plan() != nullptr)
      return "decoding '" + v.stack.decoding.name + "' skips layers; the calibration timed every layer";
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

PredictionTarget prediction_target(DeviceKind kind, int threads, const std::string& clock) {
  if (kind == DeviceKind::kCuda) return {gpu_name(), 0, clock};
  return {cpu_model(), threads > 0 ? threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency())), clock};
}

CellPredictor::CellPredictor(const Plan& plan, const Registry& registry, const PredictOptions& options,
                             const ModelConfig& model, DeviceKind kind, const std::vector<Request>& requests)
    : plan_(plan), registry_(registry) {
  if (!options.enabled || kind == DeviceKind::kSim) return;  // a simulated run is a prediction already
  const PredictionTarget t = prediction_target(kind, plan.spec.device.threads, options.clock);
  const std::string key = t.machine + (kind == DeviceKind::kCpu ? ", " + std::to_string(t.threads) + " thread(s)" : "") +
                          ", " + t.clock + " clock, model " + model.name;
  const std::string none = "prediction: no pred_* columns: ";
  if (options.cache_dir.empty()) {
    log::info(none + "no calibration cache (neither XDG_CACHE_HOME nor HOME is set; run --calibration-cache DIR)");
    return;
  }
  try {
    fit_ = find_calibration(options.cache_dir, t.machine, t.threads, t.clock, model);
  } catch (const Error& e) {
    log::warn(none + e.what());
    return;
  }
  if (!fit_) {
    log::info(none + "no calibration of " + key + " in " + options.cache_dir +
              (kind == DeviceKind::kCuda
                   ? " (a GPU profile plugs in there; inferlab calibrate times the CPU executor only)"
                   : "; make one with `inferlab calibrate " + plan.spec.source_path +
                         (t.clock == "wall" ? "" : " --clock " + t.clock) + "` (with the run's --set options)"));
    return;
  }
  file_ = calibration_cache_file(options.cache_dir, t.machine, t.threads, t.clock, model);
  shape_.config = model;
  // The simulator's logits span min(vocab, kSimVocab) tokens: prompts are folded into it, equal
  // ids staying equal (prefix caching sees the same sharing); lengths, arrivals and priorities
  // are the run's own.
  const int vocab = std::min(model.vocab_size, kSimVocab);
  requests_ = requests;
  for (Request& r : requests_)
    for (int& id : r.prompt)
      if (id >= 3) id = 3 + (id - 3) % (vocab - 3);
  stacks_.resize(plan.variants.size());
  failed_.assign(plan.variants.size(), false);
  for (std::size_t i = 0; i < plan.variants.size(); ++i) {
    const ResolvedVariant& v = plan.variants[i];
    if (const std::string why = refusal(v, *fit_, registry, shape_); !why.empty()) {
      log::info("prediction: variant '" + v.name + "' gets no pred_* columns: " + why);
      continue;
    }
    stacks_[i] = std::make_shared<const CalibratedStack>(fit_->stack(v.stack.attention.name, v.stack.quantization.name));
  }
  log::info("prediction: every cell is replayed on the calibrated simulator (" + file_ + ")");
}

CellPredictor::~CellPredictor() = default;

void CellPredictor::add(std::size_t vi, CellResult& cell) {
  if (!fit_ || vi >= stacks_.size() || !stacks_[vi] || !cell.row.ok) return;
  const ResolvedVariant& v = plan_.variants[vi];
  const ExperimentSpec& spec = plan_.spec;
  try {
    const auto t0 = std::chrono::steady_clock::now();
    SimOptions so;
    so.calibrated = stacks_[vi];
    so.profile.name = "calibrated";
    so.profile.description = "calibrated cost model of " + fit_->model + " on " + fit_->machine + " (" + file_ + ")";
    SimDevice device(so.profile.description);
    device.set_options(std::make_shared<const SimOptions>(so));
    auto attention = registry_.create_attention(v.stack.attention.name, v.attention, device);
    auto scheduler = registry_.create_scheduler(v.stack.scheduler.name, v.scheduler, device);
    auto decoder = registry_.create_decoder(v.stack.decoding.name, v.decoding, device, &shape_, attention.get());
    SimExecutor executor(shape_.config, so, device);
    EngineOptions eo;
    eo.kv = v.stack.kv;
    // The pool the real cell had, however it was sized (num_blocks, memory_mb, a GPU fraction).
    if (const double blocks = metric_value(cell.row.metrics, "kv_blocks_total"); blocks > 0) {
      eo.kv.num_blocks = static_cast<int>(blocks);
      eo.kv.memory_mb = 0;
      eo.kv.gpu_memory_fraction = 0;
    }
    eo.seed = mix_seed(spec.seed, static_cast<std::uint64_t>(cell.row.repeat));
    eo.queue_timeout_s = spec.workload.queue_timeout_s;
    eo.timeout_s = spec.workload.timeout_s;
    eo.max_new_tokens = spec.workload.max_new_tokens;
    Engine engine(executor, *scheduler, *decoder, eo);
    const MetricRow pred = compute_metrics(engine.run(requests_).timeline, spec.slo);
    for (const char* m : kPredictedMetrics) {
      const double p = metric_value(pred, m), measured = metric_value(cell.row.metrics, m);
      if (!std::isfinite(p)) continue;
      cell.row.metrics.emplace_back(predicted_name(m), p);
      if (std::isfinite(measured) && measured != 0) cell.row.metrics.emplace_back(prediction_error_name(m), p / measured - 1);
    }
    log::debug("prediction: " + v.name + " repeat " + std::to_string(cell.row.repeat) + " replayed in " +
               std::to_string(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()) + " s");
  } catch (const std::exception& e) {
    if (!failed_[vi]) log::warn("prediction: variant '" + v.name + "': the replay failed, no pred_* columns: " + e.what());
    failed_[vi] = true;
  }
}

// ---- showing predictions --------------------------------------------------------------------

std::vector<VariantPrediction> summarize_predictions(
    const std::vector<std::string>& variants,
    const std::map<std::string, std::map<std::string, std::vector<double>>>& values) {
  const auto mean = [](const std::map<std::string, std::vector<double>>& vm, const std::string& k) {
    const auto it = vm.find(k);
    if (it == vm.end() || it->second.empty()) return static_cast<double>(NAN);
    double s = 0;
    for (double x : it->second) s += x;
    return s / static_cast<double>(it->second.size());
  };
  std::vector<VariantPrediction> out;
  for (const std::string& v : variants) {
    const auto it = values.find(v);
    if (it == values.end()) continue;
    VariantPrediction vp{v, {}, false};
    for (const char* m : kPredictedMetrics) {
      if (!it->second.count(predicted_name(m))) continue;
      // The error of the means, so the row reads consistently (measured → predicted (error)).
      const double measured = mean(it->second, m), predicted = mean(it->second, predicted_name(m));
      vp.metrics.push_back({m, measured, predicted,
                            std::isfinite(measured) && measured != 0 ? predicted / measured - 1 : static_cast<double>(NAN)});
      if (std::string(m) == "tpot_ms_p50") vp.flagged = std::fabs(vp.metrics.back().error) > kPredictionFlagError;
    }
    if (!vp.metrics.empty()) out.push_back(std::move(vp));
  }
  return out;
}

std::string prediction_markdown(const std::vector<std::string>& variants, const std::vector<ResultRow>& rows) {
  std::map<std::string, std::map<std::string, std::vector<double>>> values;
  for (const ResultRow& r : rows)
    if (r.ok)
      for (const auto& [k, x] : r.metrics)
        if (std::isfinite(x)) values[r.variant][k].push_back(x);
  const std::vector<VariantPrediction> preds = summarize_predictions(variants, values);
  if (preds.empty()) return "";
  const auto number = [](double x) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.4g", x);
    return std::string(buf);
  };
  std::string md = "\n## Predicted vs measured\n\nEach cell replayed on this machine's calibrated simulator "
                   "(`pred_*` columns): measured → predicted (relative error of the means), means over repeats. A variant "
                   "whose TPOT p50 is off by more than " + number(kPredictionFlagError * 100) + " % is flagged.\n\n"
                   "| variant |";
  for (const char* m : kPredictedMetrics) md += std::string(" ") + m + " |";
  md += " prediction |\n|---|";
  for (std::size_t i = 0; i <= kPredictedMetrics.size(); ++i) md += "---|";
  md += "\n";
  for (const VariantPrediction& vp : preds) {
    std::string name = vp.variant;  // a Markdown cell
    for (std::size_t at = name.find('|'); at != std::string::npos; at = name.find('|', at + 2)) name.insert(at, "\\");
    md += "| " + name + " |";
    for (const char* m : kPredictedMetrics) {
      const auto it = std::find_if(vp.metrics.begin(), vp.metrics.end(), [&](const PredictedMetric& p) { return p.metric == m; });
      if (it == vp.metrics.end()) {
        md += " – |";
        continue;
      }
      md += " " + number(it->measured) + " → " + number(it->predicted);
      if (std::isfinite(it->error)) {
        char err[32];
        std::snprintf(err, sizeof err, " (%+.1f %%)", it->error * 100);
        md += err;
      }
      md += " |";
    }
    md += vp.flagged ? " **off: TPOT p50 error beyond " + number(kPredictionFlagError * 100) + " %** |\n" : " within bounds |\n";
  }
  return md;
}

}  // namespace inferlab
