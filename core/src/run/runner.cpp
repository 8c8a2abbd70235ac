// Run (variant x repeat into a results folder; see inferlab/run/runner.h): run_plan's stages, in the
// order PlanRun::run takes them. Planning is in runner_plan.cpp, one cell in runner_cell.cpp.
#include "inferlab/run/runner.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <set>
#include <fstream>
#include <sstream>
#include <thread>
#include <sys/wait.h>
#include <unistd.h>

#include "inferlab/model/calibration.h"
#include "inferlab/run/cell.h"
#include "inferlab/formats/checkpoint.h"
#include "inferlab/engine/engine.h"
#include "inferlab/error.h"
#include "inferlab/experiment/experiment_toml.h"
#include "inferlab/formats/formats.h"
#include "inferlab/support/log.h"
#include "inferlab/device/cuda_device.h"
#include "inferlab/device/gpu_memory.h"
#include "inferlab/experiment/input_checks.h"
#include "inferlab/results/manifest.h"
#include "inferlab/model/model.h"
#include "inferlab/results/quality.h"
#include "inferlab/results/report.h"
#include "inferlab/run/run_folder.h"
#include "inferlab/sim/sim.h"
#include "inferlab/experiment/quantization_rules.h"
#include "inferlab/workload/workload.h"
#include "run/runner_cell.h"
#include "run/runner_models.h"

namespace inferlab {

namespace fs = std::filesystem;

namespace {

// The calibration tokens (exactly spec.calibration.tokens of the text) through the float model,
// with the reference attention on the host.
CalibrationSet calibrate(const ExperimentSpec& spec, const LoadedModel& loaded, const CalibrationNeeds& needs,
                         const Registry& registry, int threads) {
  const CalibrationSpec& c = spec.calibration;
  const std::string text = read_text_file(c.text, "[calibration] text");
  auto tokens = quality_tokens(text, loaded.tokenizer.get(), loaded.weights.config.vocab_size, 0);
  if (static_cast<int>(tokens.size()) < c.tokens)
    throw Error("[calibration] text " + c.text + " gives " + std::to_string(tokens.size()) +
                " tokens, fewer than tokens = " + std::to_string(c.tokens) + "; allowed: a longer text or fewer tokens");
  tokens.resize(static_cast<std::size_t>(c.tokens));
  CpuDevice host(threads);
  auto attention = registry.create_attention(
      "naive", registry.resolve(PluginKind::kAttention, "naive", {}, "[calibration]"), host);
  log::info("calibration: " + std::to_string(tokens.size()) + " tokens of " + c.text);
  return collect_calibration(loaded.weights, *attention, tokens, c.seq_len, needs, c.seed, threads);
}

// The device line of the results header. A CUDA device is not made here: CUDA initialised in
// the parent would be unusable in the cells it forks; the GPU's name comes from the driver's
// /proc entry instead.
std::string describe_device_without_init(DeviceKind kind, int threads) {
  if (kind != DeviceKind::kCuda) return make_device(kind, threads)->describe();
  std::error_code ec;
  for (const auto& gpu : fs::directory_iterator("/proc/driver/nvidia/gpus", ec)) {
    std::ifstream info(gpu.path() / "information");
    for (std::string line; std::getline(info, line);)
      if (line.rfind("Model:", 0) == 0) return line.substr(line.find_first_not_of(" \t", 6)) + " (cuda)";
  }
  return "cuda";
}

}  // namespace

// Asked in a forked child, so that the parent (which forks the cells) never initialises CUDA
// itself. One clear error instead of every cell failing with the same one.
void require_visible_cuda(const std::string& where) {
  int fds[2];
  if (pipe(fds) != 0) return;  // cannot ask: the cells will say
  const pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return;
  }
  if (pid == 0) {
    close(fds[0]);
    std::string reason;
    const bool ok = cuda_device_visible(reason);
    if (!ok) (void)!write(fds[1], reason.data(), reason.size());
    _exit(ok ? 0 : 1);
  }
  close(fds[1]);
  std::string reason;
  char buf[256];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) reason.append(buf, static_cast<std::size_t>(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 1)
    throw Error(where + ": [device] kind = \"cuda\", but no CUDA device is visible (" + reason +
                "); allowed on this machine: cpu, sim");
}

namespace {

// What the finished cells of this run produced, for the progress line.
struct ProgressTotals {
  long long requests = 0, tokens = 0;  // finished requests, output tokens
};

// "\r[3/8 cells] int8 repeat 1 · 144 requests · 812 tok/s · 12 s, ~20 s left" on the terminal,
// rewritten in place before each cell (tok/s: output tokens of the finished cells per second).
void show_progress(std::size_t done, std::size_t total, const std::string& variant, int rep,
                   std::chrono::steady_clock::time_point t0, const ProgressTotals& totals) {
  const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::ostringstream line;
  line << "\r\033[K[" << done << "/" << total << " cells] " << variant << " repeat " << rep << " · " << totals.requests
       << " requests";
  if (el > 0 && done > 0) line << " · " << static_cast<long long>(static_cast<double>(totals.tokens) / el) << " tok/s";
  line << " · " << static_cast<long long>(el) << " s";
  if (done > 0) line << ", ~" << static_cast<long long>(el / static_cast<double>(done) * static_cast<double>(total - done)) << " s left";
  std::fputs(line.str().c_str(), stderr);
  std::fflush(stderr);
}

// The state of one run_plan call and its stages, in the order run() takes them (as StepLoop is
// the engine's). `io` (the folder, its lock and state) outlives it, so that run_plan marks the
// folder failed whatever ends it.
class PlanRun {
 public:
  PlanRun(const Plan& plan, const Registry& registry, const RunOptions& options, RunIo& io);
  RunOutcome run();

 private:
  ResultWriter& out() { return *io_.out; }
  // The results folder made (or reopened) and locked.
  void open_folder();
  // The state's identity, a resumed folder's manifest and config notes, cells/, and a fresh
  // folder's config.toml and manifest: the folder says what it is before any weights load.
  void record_start();
  // The cells a resumed folder holds, into the results; the rest are missing.
  void read_done_cells();
  // The baseline's weights and substituted models; a run that cannot load them leaves no folder.
  void load_models();
  // Removes a fresh folder (and the parents this run made) when the run cannot start.
  void abandon();
  // The results header's notes: model, workload, device, cells, reference, shard, context.
  void describe_run();
  // One calibration pass for every variant that asks (the union of their needs).
  void calibrate_once();
  // [quality]: the evaluator, and the baseline's reference log-probs measured here.
  void measure_baseline_quality();
  // The missing cells, in grid order, each written as it finishes; the cells whose child could
  // not hand over a result.
  std::vector<std::string> run_missing_cells(const RunContext& cx, RunOutcome& outcome);
  // --check-determinism: each variant's first repeat again, token for token (by hash).
  void check_determinism(const RunContext& cx, RunOutcome& outcome);
  // The run's status (complete, interrupted, failed) written, temp files removed, the outcome.
  void finish(const std::vector<std::string>& run_faults, RunOutcome& outcome);

  const Plan& plan_;
  const ExperimentSpec& spec_;
  const Registry& registry_;
  const RunOptions& options_;
  RunIo& io_;
  const bool resuming_;
  DeviceKind device_kind_ = DeviceKind::kCpu;
  ModelConfig config_;
  int threads_ = 0;
  std::vector<Request> requests_;
  bool root_existed_ = false, base_existed_ = false;
  fs::path cells_dir_;
  std::vector<std::string> notes_, names_;
  CellGrid grid_;
  LoadedModel loaded_;
  // Substituted models ([[variant]] model): loaded once, inherited by every cell's child.
  std::vector<std::unique_ptr<LoadedModel>> substituted_;
  std::vector<const ModelWeights*> variant_weights_;  // per variant; null = the baseline's
  std::unique_ptr<CalibrationSet> calibration_;
  std::unique_ptr<QualityEvaluator> quality_;
};

// The run's inputs: device kind (checked by plan_experiment), model shape, threads, requests.
PlanRun::PlanRun(const Plan& plan, const Registry& registry, const RunOptions& options, RunIo& io)
    : plan_(plan), spec_(plan.spec), registry_(registry), options_(options), io_(io),
      resuming_(!options.resume_dir.empty()) {
  device_kind_ = spec_.device.kind;
  if (device_kind_ == DeviceKind::kCuda) require_visible_cuda(spec_.source_path);
  config_ = experiment_model_config(spec_.model);
  threads_ = spec_.device.threads > 0 ? spec_.device.threads : static_cast<int>(std::thread::hardware_concurrency());
  // A simulated run's tokens are synthetic, from the narrower logits vocabulary (see kSimVocab).
  requests_ = build_workload(spec_.workload,
                             device_kind_ == DeviceKind::kSim ? std::min(config_.vocab_size, kSimVocab) : config_.vocab_size);
}

RunOutcome PlanRun::run() {
  open_folder();
  record_start();
  read_done_cells();
  load_models();
  describe_run();
  calibrate_once();
  measure_baseline_quality();
  out().set_header(spec_.name, spec_.description, names_, notes_);
  out().rewrite();
  const RunContext cx{plan_,     registry_,      options_,     loaded_.weights,   variant_weights_,
                      requests_, quality_.get(), device_kind_, calibration_.get()};
  RunOutcome outcome;
  const std::vector<std::string> run_faults = run_missing_cells(cx, outcome);
  if (options_.progress) std::fputs("\r\033[K", stderr);
  if (options_.check_determinism && !cx.stopping()) check_determinism(cx, outcome);
  finish(run_faults, outcome);
  return outcome;
}

void PlanRun::open_folder() {
  root_existed_ = fs::exists(options_.out_root);
  base_existed_ = fs::exists(fs::path(options_.out_root) / spec_.name);
  const std::string suffix = options_.shard.count > 1 ? "-shard" + std::to_string(options_.shard.index) + "of" +
                                                            std::to_string(options_.shard.count) : "";
  // A stale "running" (its process killed) is read before the lock is ours: afterwards it is held.
  const FolderStatus before = resuming_ ? read_folder_status(options_.resume_dir) : FolderStatus{};
  io_.out.emplace(resuming_ ? ResultWriter::reopen(options_.resume_dir)
                            : ResultWriter(options_.out_root, spec_.name, suffix));
  try {
    io_.folder.emplace(out().dir());  // one run per folder: Error naming the holder otherwise
  } catch (...) {
    std::error_code ec;
    if (!resuming_) fs::remove_all(out().dir(), ec);  // the empty folder just made
    throw;
  }
  if (before.stale) log::warn(out().dir() + " was " + before.detail + ": resuming it as interrupted");
}

void PlanRun::record_start() {
  cells_dir_ = fs::path(out().dir()) / "cells";
  std::string& manifest = io_.manifest;
  RunState& state = io_.state;
  state.shard = options_.shard;
  state.pid = getpid();
  state.host = host_name();
  if (resuming_) {
    std::ifstream in(fs::path(out().dir()) / "manifest.json");
    std::stringstream text;
    text << in.rdbuf();
    manifest = text.str();
    state.resumes = manifest_resumes(manifest) + 1;
    state.shard = manifest_shard(manifest);
    manifest_config_record(manifest, state);
    if (std::string note = check_folder_config(out().dir(), state, options_.force_config); !note.empty()) {
      log::warn(note);
      notes_.push_back(note);
    }
  }
  for (const ConfigChange& c : state.config_forced)
    if (c.resume != state.resumes)
      notes_.push_back("config: edited config.toml accepted by --force-config at resume " + std::to_string(c.resume));
  io_.started = true;  // from here on, whatever ends the run marks the folder
  io_.crash_reason = std::string("crashed: killed by ") + RunFolder::kSignalPlaceholder + " in the run's own process" +
                     (spec_.isolate ? "" : " (experiment.isolate = false: cells run in it)");
  if (std::error_code ec; !fs::create_directories(cells_dir_, ec) && ec)
    throw Error("cannot create " + cells_dir_.string() + ": " +
                (ec == std::errc::no_space_on_device ? no_space_message(cells_dir_.string()) : ec.message()));
  if (manifest.find("\"git_commit\"") == std::string::npos) {  // fresh, or killed before it was written
    manifest = manifest_json(plan_, registry_, config_, requests_.size(), threads_);
    if (!resuming_) {
      const std::string resolved = resolved_config_toml(plan_);
      out().write_text("config.toml", resolved);
      record_folder_config(out().dir(), resolved, state);
    }
  }
}

void PlanRun::read_done_cells() {
  for (const auto& v : plan_.variants) names_.push_back(v.name);
  // Repeats outermost so slow drift of a shared machine spreads over all variants alike.
  grid_ = read_cells(cells_dir_.string(), names_, plan_.repeats, io_.state.shard, resuming_);
  out().set_header(spec_.name, spec_.description, names_, notes_);
  write_results_from_cells(out(), grid_);
  for (const auto& [g, c] : grid_.done) io_.state.done.push_back({names_[g.vi], g.rep});
  for (const auto& g : grid_.missing) io_.state.missing.push_back({names_[g.vi], g.rep});
  io_.write_state();
  out().rewrite();
}

// A run that cannot start (weights that do not load) leaves no folder behind; one killed
// while loading leaves config.toml and a manifest that says "running".
void PlanRun::abandon() {
  if (resuming_) return;
  io_.abandoned = true;
  const std::string dir = out().dir();
  io_.folder.reset();  // the lock goes with the folder
  std::error_code ec;
  fs::remove_all(dir, ec);
  if (!base_existed_) fs::remove(fs::path(options_.out_root) / spec_.name, ec);
  if (!root_existed_) fs::remove(options_.out_root, ec);
}

void PlanRun::load_models() {
  auto t_load = std::chrono::steady_clock::now();
  try {
    if (device_kind_ == DeviceKind::kSim) loaded_.weights.config = config_;  // simulation: the shape only
    else loaded_ = load_experiment_model(spec_.model);
  } catch (...) {
    abandon();
    throw;
  }
  // Substituted models: checked against the baseline's tokenizer before any cell.
  substituted_.resize(plan_.variants.size());
  variant_weights_.assign(plan_.variants.size(), nullptr);
  try {
    for (std::size_t i = 0; i < plan_.variants.size(); ++i) {
      const ResolvedVariant& v = plan_.variants[i];
      if (!v.model) continue;
      substituted_[i] = std::make_unique<LoadedModel>(load_experiment_model(*v.model));
      check_same_tokenizer(loaded_, *substituted_[i], v.model_where + ": variant '" + v.name + "'");
      variant_weights_[i] = &substituted_[i]->weights;
    }
  } catch (...) {
    abandon();
    throw;
  }
  if (loaded_.tokenizer && !resuming_) {  // the tokenizer's BOS/EOS conventions as applied, now that it is loaded
    io_.manifest = manifest_json(plan_, registry_, config_, requests_.size(), threads_, loaded_.tokenizer.get());
    io_.write_state();
  }
  log::info("model " + loaded_.weights.config.name + ": " + std::to_string(loaded_.weights.config.parameter_count()) +
            " parameters, loaded in " +
            std::to_string(std::chrono::duration<double>(std::chrono::steady_clock::now() - t_load).count()) + " s");
  log::info("workload: " + std::to_string(requests_.size()) + " requests");
}

void PlanRun::describe_run() {
  const ModelWeights& weights = loaded_.weights;
  // Described by a device made and dropped here: an isolated run forks with no threads held.
  const bool sim = device_kind_ == DeviceKind::kSim;
  const std::vector<std::string> config_notes = notes_;
  notes_ = {"model: " + weights.config.name +
                (sim ? " (simulated: no weights)" : spec_.model.preset.empty() ? " (checkpoint)" : " (seeded random weights)") +
                ", " + std::to_string(weights.config.parameter_count()) + " parameters",
            "workload: " + std::to_string(requests_.size()) + " requests" +
                (spec_.workload.trace.empty() ? " (synthetic, " + spec_.workload.arrival + ")" : " from " + spec_.workload.trace),
            "device: " + (sim ? sim_device_description(spec_.device) + " x tp " + std::to_string(spec_.device.tp) +
                                    " x pp " + std::to_string(spec_.device.pp) + ", cost model of docs/simulation.md"
                              : describe_device_without_init(device_kind_, spec_.device.threads)) + ", " + cpu_model(),
            std::string("cells: ") + (spec_.isolate ? "each in its own process" : "in the run's process")};
  notes_.insert(notes_.end(), config_notes.begin(), config_notes.end());
  if (const std::string note = quantized_source_note(weights.config.source_linear_types); !note.empty())
    notes_.push_back("reference: " + note);
  const Shard& shard = io_.state.shard;
  if (shard.count > 1)
    notes_.push_back("shard " + std::to_string(shard.index) + "/" + std::to_string(shard.count) +
                     ": this folder holds only the cells k = repeat × variants + variant index with k mod " +
                     std::to_string(shard.count) + " = " + std::to_string(shard.index) +
                     " (ratios only where it holds baseline rows); `inferlab merge` combines the shards");
  // Positions past max_seq_len still run (RoPE extrapolates) but the model was never trained
  // there: say so rather than let a long-context sweep pass silently.
  std::size_t beyond = 0;
  for (const Request& r : requests_)
    beyond += static_cast<long long>(r.prompt.size()) + r.max_output - 1 > weights.config.max_seq_len;
  if (beyond > 0) {
    notes_.push_back("context: " + std::to_string(beyond) + " of " + std::to_string(requests_.size()) +
                     " requests run past the model's trained context of " +
                     std::to_string(weights.config.max_seq_len) + " tokens (positions beyond it are extrapolated)");
    log::warn(notes_.back());
  }
}

// In the parent, so that every cell's child inherits it; its device is gone before the first fork.
void PlanRun::calibrate_once() {
  CalibrationNeeds needs;
  CpuDevice host(1);
  for (const ResolvedVariant& v : plan_.variants)
    needs = merge_needs(needs, make_variant_quantization(registry_, v, host)->calibration_needs());
  if (!needs.any() || device_kind_ == DeviceKind::kSim) return;  // a simulated run has no weights and runs no linear
  calibration_ = std::make_unique<CalibrationSet>(calibrate(spec_, loaded_, needs, registry_, threads_));
  notes_.push_back("calibration: " + std::to_string(calibration_->tokens) + " tokens of " + spec_.calibration.text +
                   " in windows of " + std::to_string(spec_.calibration.seq_len) +
                   ", float-model perplexity " + std::to_string(calibration_->perplexity));
}

void PlanRun::measure_baseline_quality() {
  if (!spec_.quality.enabled) return;
  const ModelWeights& weights = loaded_.weights;
  const std::string text = read_text_file(spec_.quality.text, "[quality] text");
  auto tokens = quality_tokens(text, loaded_.tokenizer.get(), weights.config.vocab_size, spec_.quality.max_tokens,
                               spec_.model.add_bos);
  notes_.push_back("quality: " + std::to_string(tokens.size()) + " tokens of " + spec_.quality.text +
                   (loaded_.tokenizer ? "" : " (UTF-8 bytes as ids: the model has no tokenizer)"));
  quality_ = std::make_unique<QualityEvaluator>(spec_.quality, std::move(tokens));
  // The baseline's log-probs are the reference every variant is compared with: measured here
  // (not in a cell's child, whose memory the parent never sees), on a device dropped before
  // any fork. Cells other than the baseline's then measure only their own variant.
  // CUDA must not be initialised in this process before cells fork (a forked child cannot use
  // its parent's CUDA state), so a CUDA run's reference log-probs come from the CPU.
  const ResolvedVariant& b = plan_.variants.front();
  auto device = make_device(device_kind_ == DeviceKind::kCuda ? DeviceKind::kCpu : device_kind_, spec_.device.threads);
  if (device->kind() != DeviceKind::kSim)  // same results; fused as the cells
    compute_device(*device, "[device] fuse").set_fuse(spec_.device.fuse);
  auto attention = registry_.create_attention(b.stack.attention.name, b.attention, *device);
  auto quant = make_variant_quantization(registry_, b, *device, &weights);
  Model model(weights, *quant, *device, calibration_.get());
  // The baseline as its decoder runs it (a layer-skipping baseline is evaluated skipping).
  auto decoder = registry_.create_decoder(b.stack.decoding.name, b.decoding, *device, &weights, attention.get());
  model.set_layer_plan(decoder->layer_plan());
  quality_->evaluate(b.name, model, *attention, true, b.stack.kv.format);
}

std::vector<std::string> PlanRun::run_missing_cells(const RunContext& cx, RunOutcome& outcome) {
  RunState& state = io_.state;
  std::vector<std::string> run_faults;  // cells whose child could not hand over a result
  CellPredictor predictor(plan_, registry_, options_.predict, loaded_.weights.config, device_kind_, requests_);
  const auto t_cells = std::chrono::steady_clock::now();
  ProgressTotals totals;
  for (const GridCell& cell : grid_.missing) {
    if (cx.stopping()) break;
    if (options_.progress) show_progress(outcome.ran, grid_.missing.size(), names_[cell.vi], cell.rep, t_cells, totals);
    auto c = run_cell_guarded(cx, cell.vi, cell.rep, (cells_dir_ / ("." + cell_file_name(cell.vi, cell.rep) + ".child")).string());
    if (!c) break;
    predictor.add(cell.vi, *c);  // outside the cell's timed region: its pred_* columns
    write_cell_file((cells_dir_ / cell_file_name(cell.vi, cell.rep)).string(), *c);
    ++outcome.ran;
    for (const RequestTimeline& r : c->requests) {
      totals.requests += r.finish_s >= 0;
      totals.tokens += r.output_tokens;
    }
    if (c->run_fault) {  // a failed row now, still missing for the next resume
      run_faults.push_back(names_[cell.vi] + " repeat " + std::to_string(cell.rep) + ": " + c->row.error);
    } else {
      state.done.push_back({names_[cell.vi], cell.rep});
      std::erase_if(state.missing, [&](const CellRef& m) { return m.variant == names_[cell.vi] && m.repeat == cell.rep; });
    }
    io_.write_state();
    out().add(c->row, c->requests, true, c->steps);
  }
  return run_faults;
}

void PlanRun::check_determinism(const RunContext& cx, RunOutcome& outcome) {
  for (std::size_t vi = 0; vi < plan_.variants.size() && !cx.stopping(); ++vi) {
    const auto first = std::find_if(out().rows().begin(), out().rows().end(),
                                    [&](const ResultRow& r) { return r.variant == names_[vi] && r.repeat == 0; });
    if (first == out().rows().end() || !first->ok) continue;
    const std::uint64_t want = first->tokens_hash;
    auto again = run_cell_guarded(cx, vi, 0, (cells_dir_ / (".check-v" + std::to_string(vi) + ".child")).string());
    if (!again) break;
    std::string verdict = !again->row.ok ? "rerun failed: " + again->row.error
                          : again->row.tokens_hash == want
                              ? "same (" + hash_hex(want) + ")"
                              : "differs (" + hash_hex(want) + " then " + hash_hex(again->row.tokens_hash) + ")";
    outcome.nondeterministic += !(again->row.ok && again->row.tokens_hash == want);
    io_.state.determinism.emplace_back(names_[vi], verdict);
    notes_.push_back("determinism: " + names_[vi] + " repeat 0 rerun: " + verdict);
    if (verdict.rfind("same", 0) != 0) log::error(notes_.back());
  }
  out().set_header(spec_.name, spec_.description, names_, notes_);
}

void PlanRun::finish(const std::vector<std::string>& run_faults, RunOutcome& outcome) {
  RunState& state = io_.state;
  outcome.interrupted = options_.interrupted ? options_.interrupted() : 0;
  if (outcome.interrupted) {
    state.status = "interrupted";
    state.signal = signal_name(outcome.interrupted);
  } else if (!run_faults.empty()) {
    state.status = "failed";
    state.reason = std::to_string(run_faults.size()) + " cell(s) could not hand over their results (" + run_faults.front() +
                   (run_faults.size() > 1 ? "; …" : "") + ")";
  } else {
    state.status = state.missing.empty() ? "complete" : "interrupted";
    if (!state.missing.empty()) state.signal = "a signal to a cell's process";
  }
  io_.write_state();
  out().rewrite();
  remove_temp_files(out().dir());
  outcome.dir = out().dir();
  outcome.rows = out().rows().size();
  for (const ResultRow& row : out().rows()) outcome.failed += !row.ok;
}

}  // namespace

RunOutcome run_plan(const Plan& plan, const Registry& registry, const RunOptions& options) {
  RunIo io;
  try {
    return PlanRun(plan, registry, options, io).run();
  } catch (const std::exception& e) {
    if (io.started && !io.abandoned) io.mark_failed(e.what());
    throw;
  }
}

}  // namespace inferlab
