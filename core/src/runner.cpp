// Run (variant x repeat into a results folder; see inferlab/runner.h). Planning is in
// runner_plan.cpp, one cell in runner_cell.cpp.
#include "inferlab/runner.h"

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

#include "inferlab/calibration.h"
#include "inferlab/cell.h"
#include "inferlab/checkpoint.h"
#include "inferlab/engine.h"
#include "inferlab/error.h"
#include "inferlab/experiment_toml.h"
#include "inferlab/formats.h"
#include "inferlab/log.h"
#include "inferlab/cuda_device.h"
#include "inferlab/gpu_memory.h"
#include "inferlab/input_checks.h"
#include "inferlab/manifest.h"
#include "inferlab/model.h"
#include "inferlab/quality.h"
#include "inferlab/report.h"
#include "inferlab/run_folder.h"
#include "inferlab/sim.h"
#include "inferlab/quantization_rules.h"
#include "inferlab/workload.h"
#include "runner_cell.h"
#include "runner_models.h"

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

}  // namespace

namespace {

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

}  // namespace

namespace {

// run_plan's work; `io` (the folder, its lock and state) outlives it, so that run_plan marks the
// folder failed whatever ends it.
RunOutcome run_plan_in(const Plan& plan, const Registry& registry, const RunOptions& options, RunIo& io) {
  const ExperimentSpec& spec = plan.spec;
  const bool resuming = !options.resume_dir.empty();
  DeviceKind device_kind = DeviceKind::kCpu;
  parse_device_kind(spec.device.kind, device_kind);  // checked by plan_experiment
  if (device_kind == DeviceKind::kCuda) require_visible_cuda(spec.source_path);
  const ModelConfig config = experiment_model_config(spec.model);
  const int threads = spec.device.threads > 0 ? spec.device.threads : static_cast<int>(std::thread::hardware_concurrency());
  // A simulated run's tokens are synthetic, from the narrower logits vocabulary (see kSimVocab).
  const std::vector<Request> requests =
      build_workload(spec.workload, device_kind == DeviceKind::kSim ? std::min(config.vocab_size, kSimVocab) : config.vocab_size);

  // The folder says what it is before any weights load: config and manifest come first.
  const bool root_existed = fs::exists(options.out_root), base_existed = fs::exists(fs::path(options.out_root) / spec.name);
  const std::string suffix = options.shard.count > 1 ? "-shard" + std::to_string(options.shard.index) + "of" +
                                                           std::to_string(options.shard.count) : "";
  // A stale "running" (its process killed) is read before the lock is ours: afterwards it is held.
  const FolderStatus before = resuming ? read_folder_status(options.resume_dir) : FolderStatus{};
  ResultWriter& out = io.out.emplace(resuming ? ResultWriter::reopen(options.resume_dir)
                                              : ResultWriter(options.out_root, spec.name, suffix));
  try {
    io.folder.emplace(out.dir());  // one run per folder: Error naming the holder otherwise
  } catch (...) {
    std::error_code ec;
    if (!resuming) fs::remove_all(out.dir(), ec);  // the empty folder just made
    throw;
  }
  if (before.stale) log::warn(out.dir() + " was " + before.detail + ": resuming it as interrupted");
  const fs::path cells_dir = fs::path(out.dir()) / "cells";
  std::string& manifest = io.manifest;
  RunState& state = io.state;
  state.shard = options.shard;
  state.pid = getpid();
  state.host = host_name();
  std::vector<std::string> notes;
  if (resuming) {
    std::ifstream in(fs::path(out.dir()) / "manifest.json");
    std::stringstream text;
    text << in.rdbuf();
    manifest = text.str();
    state.resumes = manifest_resumes(manifest) + 1;
    state.shard = manifest_shard(manifest);
    manifest_config_record(manifest, state);
    if (std::string note = check_folder_config(out.dir(), state, options.force_config); !note.empty()) {
      log::warn(note);
      notes.push_back(note);
    }
  }
  for (const ConfigChange& c : state.config_forced)
    if (c.resume != state.resumes)
      notes.push_back("config: edited config.toml accepted by --force-config at resume " + std::to_string(c.resume));
  io.started = true;  // from here on, whatever ends the run marks the folder
  io.crash_reason = std::string("crashed: killed by ") + RunFolder::kSignalPlaceholder + " in the run's own process" +
                    (spec.isolate ? "" : " (experiment.isolate = false: cells run in it)");
  if (std::error_code ec; !fs::create_directories(cells_dir, ec) && ec)
    throw Error("cannot create " + cells_dir.string() + ": " +
                (ec == std::errc::no_space_on_device ? no_space_message(cells_dir.string()) : ec.message()));
  if (manifest.find("\"git_commit\"") == std::string::npos) {  // fresh, or killed before it was written
    manifest = manifest_json(plan, registry, config, requests.size(), threads);
    if (!resuming) {
      const std::string resolved = resolved_config_toml(plan);
      out.write_text("config.toml", resolved);
      record_folder_config(out.dir(), resolved, state);
    }
  }
  std::vector<std::string> names;
  for (const auto& v : plan.variants) names.push_back(v.name);
  // Repeats outermost so slow drift of a shared machine spreads over all variants alike.
  const CellGrid grid = read_cells(cells_dir.string(), names, plan.repeats, state.shard, resuming);
  out.set_header(spec.name, spec.description, names, notes);
  write_results_from_cells(out, grid);
  for (const auto& [g, c] : grid.done) state.done.push_back({names[g.vi], g.rep});
  for (const auto& g : grid.missing) state.missing.push_back({names[g.vi], g.rep});
  auto write_state = [&] { io.write_state(); };
  write_state();
  out.rewrite();

  // A run that cannot start (weights that do not load) leaves no folder behind; one killed
  // while loading leaves config.toml and a manifest that says "running".
  auto abandon = [&] {
    if (resuming) return;
    io.abandoned = true;
    io.folder.reset();  // the lock goes with the folder
    std::error_code ec;
    fs::remove_all(out.dir(), ec);
    if (!base_existed) fs::remove(fs::path(options.out_root) / spec.name, ec);
    if (!root_existed) fs::remove(options.out_root, ec);
  };
  auto t_load = std::chrono::steady_clock::now();
  LoadedModel loaded;
  try {
    if (device_kind == DeviceKind::kSim) loaded.weights.config = config;  // simulation: the shape only
    else loaded = load_experiment_model(spec.model);
  } catch (...) {
    abandon();
    throw;
  }
  const ModelWeights& weights = loaded.weights;
  // Substituted models ([[variant]] model): loaded once here, checked against the baseline's
  // tokenizer before any cell, and inherited by every cell's child process.
  std::vector<std::unique_ptr<LoadedModel>> substituted(plan.variants.size());
  std::vector<const ModelWeights*> variant_weights(plan.variants.size(), nullptr);
  try {
    for (std::size_t i = 0; i < plan.variants.size(); ++i) {
      const ResolvedVariant& v = plan.variants[i];
      if (!v.model) continue;
      substituted[i] = std::make_unique<LoadedModel>(load_experiment_model(*v.model));
      check_same_tokenizer(loaded, *substituted[i], v.model_where + ": variant '" + v.name + "'");
      variant_weights[i] = &substituted[i]->weights;
    }
  } catch (...) {
    abandon();
    throw;
  }
  if (loaded.tokenizer && !resuming) {  // the tokenizer's BOS/EOS conventions as applied, now that it is loaded
    manifest = manifest_json(plan, registry, config, requests.size(), threads, loaded.tokenizer.get());
    write_state();
  }
  log::info("model " + weights.config.name + ": " + std::to_string(weights.config.parameter_count()) +
            " parameters, loaded in " +
            std::to_string(std::chrono::duration<double>(std::chrono::steady_clock::now() - t_load).count()) + " s");
  log::info("workload: " + std::to_string(requests.size()) + " requests");
  // Described by a device made and dropped here: an isolated run forks with no threads held.
  const bool sim = device_kind == DeviceKind::kSim;
  const std::vector<std::string> config_notes = notes;
  notes = {"model: " + weights.config.name +
               (sim ? " (simulated: no weights)" : spec.model.preset.empty() ? " (checkpoint)" : " (seeded random weights)") +
               ", " + std::to_string(weights.config.parameter_count()) + " parameters",
           "workload: " + std::to_string(requests.size()) + " requests" +
               (spec.workload.trace.empty() ? " (synthetic, " + spec.workload.arrival + ")" : " from " + spec.workload.trace),
           "device: " + (sim ? sim_device_description(spec.device) + " x tp " + std::to_string(spec.device.tp) +
                                   " x pp " + std::to_string(spec.device.pp) + ", cost model of docs/simulation.md"
                             : describe_device_without_init(device_kind, spec.device.threads)) + ", " + cpu_model(),
           std::string("cells: ") + (spec.isolate ? "each in its own process" : "in the run's process")};
  notes.insert(notes.end(), config_notes.begin(), config_notes.end());
  if (const std::string note = quantized_source_note(weights.config.source_linear_types); !note.empty())
    notes.push_back("reference: " + note);
  if (state.shard.count > 1)
    notes.push_back("shard " + std::to_string(state.shard.index) + "/" + std::to_string(state.shard.count) +
                    ": this folder holds only the cells k = repeat × variants + variant index with k mod " +
                    std::to_string(state.shard.count) + " = " + std::to_string(state.shard.index) +
                    " (ratios only where it holds baseline rows); `inferlab merge` combines the shards");
  // Positions past max_seq_len still run (RoPE extrapolates) but the model was never trained
  // there: say so rather than let a long-context sweep pass silently.
  std::size_t beyond = 0;
  for (const Request& r : requests)
    beyond += static_cast<long long>(r.prompt.size()) + r.max_output - 1 > weights.config.max_seq_len;
  if (beyond > 0) {
    notes.push_back("context: " + std::to_string(beyond) + " of " + std::to_string(requests.size()) +
                    " requests run past the model's trained context of " +
                    std::to_string(weights.config.max_seq_len) + " tokens (positions beyond it are extrapolated)");
    log::warn(notes.back());
  }

  // One calibration pass for every variant that asks (the union of their needs), in the parent
  // so that every cell's child inherits it; its device is gone before the first fork.
  std::unique_ptr<CalibrationSet> calibration;
  {
    CalibrationNeeds needs;
    CpuDevice host(1);
    for (const ResolvedVariant& v : plan.variants)
      needs = merge_needs(needs, make_variant_quantization(registry, v, host)->calibration_needs());
    if (needs.any() && !sim) {  // a simulated run has no weights and runs no linear
      calibration = std::make_unique<CalibrationSet>(calibrate(spec, loaded, needs, registry, threads));
      notes.push_back("calibration: " + std::to_string(calibration->tokens) + " tokens of " + spec.calibration.text +
                      " in windows of " + std::to_string(spec.calibration.seq_len) +
                      ", float-model perplexity " + std::to_string(calibration->perplexity));
    }
  }

  std::unique_ptr<QualityEvaluator> quality;
  if (spec.quality.enabled) {
    const std::string text = read_text_file(spec.quality.text, "[quality] text");
    auto tokens = quality_tokens(text, loaded.tokenizer.get(), weights.config.vocab_size, spec.quality.max_tokens,
                                 spec.model.add_bos);
    notes.push_back("quality: " + std::to_string(tokens.size()) + " tokens of " + spec.quality.text +
                    (loaded.tokenizer ? "" : " (UTF-8 bytes as ids: the model has no tokenizer)"));
    quality = std::make_unique<QualityEvaluator>(spec.quality, std::move(tokens));
    // The baseline's log-probs are the reference every variant is compared with: measured here
    // (not in a cell's child, whose memory the parent never sees), on a device dropped before
    // any fork. Cells other than the baseline's then measure only their own variant.
    // CUDA must not be initialised in this process before cells fork (a forked child cannot use
    // its parent's CUDA state), so a CUDA run's reference log-probs come from the CPU.
    const ResolvedVariant& b = plan.variants.front();
    auto device = make_device(device_kind == DeviceKind::kCuda ? DeviceKind::kCpu : device_kind, spec.device.threads);
    device->set_fuse(spec.device.fuse);  // same results either way; fused as the run's cells
    auto attention = registry.create_attention(b.stack.attention.name, b.attention, *device);
    auto quant = make_variant_quantization(registry, b, *device, &weights);
    Model model(weights, *quant, *device, calibration.get());
    // The baseline as its decoder runs it (a layer-skipping baseline is evaluated skipping).
    auto decoder = registry.create_decoder(b.stack.decoding.name, b.decoding, *device, &weights, attention.get());
    model.set_layer_plan(decoder->layer_plan());
    quality->evaluate(b.name, model, *attention, true, b.stack.kv.format);
  }
  out.set_header(spec.name, spec.description, names, notes);
  out.rewrite();

  const RunContext cx{plan,     registry,      options,     weights,           variant_weights,
                      requests, quality.get(), device_kind, calibration.get()};
  RunOutcome outcome;
  std::vector<std::string> run_faults;  // cells whose child could not hand over a result
  const auto t_cells = std::chrono::steady_clock::now();
  ProgressTotals totals;
  for (const GridCell& cell : grid.missing) {
    if (cx.stopping()) break;
    if (options.progress) show_progress(outcome.ran, grid.missing.size(), names[cell.vi], cell.rep, t_cells, totals);
    auto c = run_cell_guarded(cx, cell.vi, cell.rep, (cells_dir / ("." + cell_file_name(cell.vi, cell.rep) + ".child")).string());
    if (!c) break;
    write_cell_file((cells_dir / cell_file_name(cell.vi, cell.rep)).string(), *c);
    ++outcome.ran;
    for (const RequestTimeline& r : c->requests) {
      totals.requests += r.finish_s >= 0;
      totals.tokens += r.output_tokens;
    }
    if (c->run_fault) {  // a failed row now, still missing for the next resume
      run_faults.push_back(names[cell.vi] + " repeat " + std::to_string(cell.rep) + ": " + c->row.error);
    } else {
      state.done.push_back({names[cell.vi], cell.rep});
      std::erase_if(state.missing, [&](const CellRef& m) { return m.variant == names[cell.vi] && m.repeat == cell.rep; });
    }
    write_state();
    out.add(c->row, c->requests, true, c->steps);
  }

  if (options.progress) std::fputs("\r\033[K", stderr);

  // Determinism: each variant's first repeat again, token for token (by hash).
  if (options.check_determinism && !cx.stopping()) {
    for (std::size_t vi = 0; vi < plan.variants.size() && !cx.stopping(); ++vi) {
      const auto first = std::find_if(out.rows().begin(), out.rows().end(),
                                      [&](const ResultRow& r) { return r.variant == names[vi] && r.repeat == 0; });
      if (first == out.rows().end() || !first->ok) continue;
      const std::uint64_t want = first->tokens_hash;
      auto again = run_cell_guarded(cx, vi, 0, (cells_dir / (".check-v" + std::to_string(vi) + ".child")).string());
      if (!again) break;
      std::string verdict = !again->row.ok ? "rerun failed: " + again->row.error
                            : again->row.tokens_hash == want
                                ? "same (" + hash_hex(want) + ")"
                                : "differs (" + hash_hex(want) + " then " + hash_hex(again->row.tokens_hash) + ")";
      outcome.nondeterministic += !(again->row.ok && again->row.tokens_hash == want);
      state.determinism.emplace_back(names[vi], verdict);
      notes.push_back("determinism: " + names[vi] + " repeat 0 rerun: " + verdict);
      if (verdict.rfind("same", 0) != 0) log::error(notes.back());
    }
    out.set_header(spec.name, spec.description, names, notes);
  }

  outcome.interrupted = options.interrupted ? options.interrupted() : 0;
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
  write_state();
  out.rewrite();
  remove_temp_files(out.dir());
  outcome.dir = out.dir();
  outcome.rows = out.rows().size();
  for (const ResultRow& row : out.rows()) outcome.failed += !row.ok;
  return outcome;
}

}  // namespace

RunOutcome run_plan(const Plan& plan, const Registry& registry, const RunOptions& options) {
  RunIo io;
  try {
    return run_plan_in(plan, registry, options, io);
  } catch (const std::exception& e) {
    if (io.started && !io.abandoned) io.mark_failed(e.what());
    throw;
  }
}

}  // namespace inferlab
