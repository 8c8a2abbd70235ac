// Plan (every variant checked before any work) and run (variant x repeat into a results folder).
#include "inferlab/runner.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <fstream>
#include <sstream>
#include <thread>
#include <unistd.h>

#include "inferlab/calibration.h"
#include "inferlab/cell.h"
#include "inferlab/checkpoint.h"
#include "inferlab/engine.h"
#include "inferlab/error.h"
#include "inferlab/experiment_toml.h"
#include "inferlab/log.h"
#include "inferlab/manifest.h"
#include "inferlab/model.h"
#include "inferlab/quality.h"
#include "inferlab/report.h"
#include "inferlab/sim.h"
#include "inferlab/workload.h"

namespace inferlab {

namespace fs = std::filesystem;

namespace {

// Reads the trace and lengths files through, so a malformed row is a located error at plan
// time (validate and run alike), before any weights are loaded.
void check_workload_files(const WorkloadSpec& w) {
  if (!w.trace.empty()) read_trace(w.trace, w.format);
  if (!w.lengths_file.empty() && (w.prompt_len.dist == "trace" || w.output_len.dist == "trace"))
    read_lengths_file(w.lengths_file);
}

// [model] n_layers may cut a checkpoint's depth, never add layers.
void check_checkpoint_layers(const ModelSpec& spec, int file_layers) {
  if (spec.n_layers > file_layers)
    throw Error("[model] n_layers = " + std::to_string(spec.n_layers) + ", but " + spec.path + " has " +
                std::to_string(file_layers) + " layers; allowed: 1.." + std::to_string(file_layers));
}

// The calibration tokens (exactly spec.calibration.tokens of the text) through the float model,
// with the reference attention on the host.
CalibrationSet calibrate(const ExperimentSpec& spec, const LoadedModel& loaded, const CalibrationNeeds& needs,
                         const Registry& registry, int threads) {
  const CalibrationSpec& c = spec.calibration;
  std::ifstream in(c.text, std::ios::binary);
  if (!in) throw Error("[calibration] text " + c.text + " cannot be read");
  std::stringstream text;
  text << in.rdbuf();
  auto tokens = quality_tokens(text.str(), loaded.tokenizer.get(), loaded.weights.config.vocab_size, 0);
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

SimOptions sim_options(const DeviceSpec& device) {
  SimOptions o;
  o.profile = hw_profile(device.profile);
  o.tp = device.tp;
  o.pp = device.pp;
  return o;
}

Params& ResolvedVariant::params(PluginKind kind) {
  switch (kind) {
    case PluginKind::kAttention: return attention;
    case PluginKind::kQuantization: return quantization;
    case PluginKind::kScheduling: return scheduler;
    case PluginKind::kDecoding: return decoding;
  }
  return attention;
}
const Params& ResolvedVariant::params(PluginKind kind) const { return const_cast<ResolvedVariant*>(this)->params(kind); }

ModelConfig experiment_model_config(const ModelSpec& spec) {
  if (!spec.preset.empty()) {
    ModelConfig c = preset_config(spec.preset);
    if (spec.n_layers > 0) c.n_layers = spec.n_layers;
    return c;
  }
  ModelConfig c = read_model_config(spec.path, parse_model_format(spec.format));
  check_checkpoint_layers(spec, c.n_layers);
  if (spec.n_layers > 0) c.n_layers = spec.n_layers;
  return c;
}

namespace {

// Random fp32 weights of a preset must fit in memory (for callers that load without a plan;
// plan_experiment refuses a run whose whole estimate does not fit, memory_estimate.h).
void check_preset_fits(const ModelSpec& spec, const ModelConfig& c) {
  const double bytes = static_cast<double>(c.parameter_count()) * 4.0;
  const double avail = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGE_SIZE));
  if (bytes * 2.2 > avail)  // float weights + the variant's copy
    throw Error("model preset '" + spec.preset + "' needs about " + std::to_string(static_cast<long long>(bytes * 2.2 / (1 << 20))) +
                " MiB for fp32 weights, this machine has " + std::to_string(static_cast<long long>(avail / (1 << 20))) +
                " MiB; set [model] n_layers to a smaller depth");
}

}  // namespace

LoadedModel load_experiment_model(const ModelSpec& spec) {
  if (!spec.preset.empty()) {
    ModelConfig c = experiment_model_config(spec);
    check_preset_fits(spec, c);
    LoadedModel m;
    m.weights = random_weights(c, spec.seed);
    return m;
  }
  LoadedModel m = load_model(spec.path, parse_model_format(spec.format), spec.tokenizer);
  check_checkpoint_layers(spec, m.weights.config.n_layers);
  if (spec.n_layers > 0 && spec.n_layers < m.weights.config.n_layers) {
    m.weights.layers.resize(static_cast<std::size_t>(spec.n_layers));
    m.weights.config.n_layers = spec.n_layers;
  }
  return m;
}

Plan plan_experiment(const ExperimentSpec& spec, const Registry& registry, const ModelConfig& model,
                     std::uint64_t max_memory_bytes) {
  Plan plan;
  plan.spec = spec;
  plan.repeats = spec.repeats;
  for (const Variant& v : spec.variants) {
    ResolvedVariant rv{v.name, v.stack, {}, {}, {}, {}};
    for (PluginKind k : kStackKinds) {
      const PluginChoice& ch = v.stack.choice(k);
      const std::string where = ch.where + ": variant '" + v.name + "'";
      rv.params(k) = registry.resolve(k, ch.name, ch.params, where);
    }
    // KV storage comes from the quantization strategy; attention must be able to read it. The
    // strategy is asked on a one-thread host device: planning allocates nothing.
    DeviceKind device_kind = DeviceKind::kCpu;
    check(parse_device_kind(spec.device.kind, device_kind), "unknown device kind '" + spec.device.kind + "'");
    CpuDevice host(1);
    std::shared_ptr<Quantization> quant;
    try {  // a constructor's check (int4 group_size = 12) gets the choice's file:line
      quant = registry.create_quantization(v.stack.quantization.name, rv.quantization, host);
    } catch (const Error& e) {
      throw Error(v.stack.quantization.where + ": variant '" + v.name + "': quantization '" + v.stack.quantization.name +
                  "' cannot run this: " + e.what());
    }
    if (quant->calibration_needs().any() && !spec.calibration.enabled)
      throw Error(v.stack.quantization.where + ": variant '" + v.name + "': quantization '" +
                  v.stack.quantization.name +
                  "' calibrates on the float model's activations and needs a [calibration] section "
                  "(text, tokens, seq_len, seed)");
    for (PluginKind k : kStackKinds) {
      const PluginChoice& ch = v.stack.choice(k);
      SupportQuery q{model, device_kind, quant->kv_dtype(), rv.params(k)};
      auto reasons = registry.check_support(k, ch.name, q);
      if (!reasons.empty()) {
        std::string all;
        for (const auto& r : reasons) all += (all.empty() ? "" : "; ") + r;
        throw Error(ch.where + ": variant '" + v.name + "': " + plugin_kind_name(k) + " '" + ch.name +
                    "' cannot run this: " + all);
      }
    }
    plan.variants.push_back(std::move(rv));
  }
  check_workload_files(spec.workload);
  if (spec.device.kind == "sim" && spec.quality.enabled)
    throw Error("[quality] needs real logits; a simulated run (device kind \"sim\") has none: drop [quality] or use cpu");
  plan.memory = estimate_run_memory(plan, registry, model);
  const std::uint64_t limit = max_memory_bytes > 0 ? max_memory_bytes : machine_memory_bytes();
  if (plan.memory.total() > limit)
    throw Error(spec.source_path + ": the run needs about " + plan.memory.describe() + "; " +
                (max_memory_bytes > 0 ? "--max-memory allows " : "this machine has ") + format_bytes(limit) +
                "; lower [model] n_layers, the workload's requests or lengths, or kv.num_blocks, or store fewer "
                "bits per weight (quantization)");
  return plan;
}

namespace {

// What every cell of a run shares.
struct RunContext {
  const Plan& plan;
  const Registry& registry;
  const RunOptions& options;
  const ModelWeights& weights;
  const std::vector<Request>& requests;
  QualityEvaluator* quality;
  DeviceKind device_kind;
  const CalibrationSet* calibration;  // null when no variant calibrates
  bool stopping() const { return options.interrupted && options.interrupted() != 0; }
};

// One variant × repeat in this process. The device (and its thread pool) is made here, so an
// isolated cell makes it inside its child. Throws on any failure.
CellResult run_cell(const RunContext& cx, std::size_t vi, int rep) {
  const ExperimentSpec& spec = cx.plan.spec;
  const ResolvedVariant& v = cx.plan.variants[vi];
  CellResult c;
  c.row.variant = v.name;
  c.row.repeat = rep;
  const bool sim = cx.device_kind == DeviceKind::kSim;
  std::unique_ptr<Device> device = sim ? std::make_unique<SimDevice>(hw_profile(spec.device.profile).description)
                                       : make_device(cx.device_kind, spec.device.threads);
  auto attention = cx.registry.create_attention(v.stack.attention.name, v.attention, *device);
  auto quant = cx.registry.create_quantization(v.stack.quantization.name, v.quantization, *device);
  auto scheduler = cx.registry.create_scheduler(v.stack.scheduler.name, v.scheduler, *device);
  auto decoder = cx.registry.create_decoder(v.stack.decoding.name, v.decoding, *device, &cx.weights, attention.get());
  // A simulated run never materialises the model: the executor needs only its config.
  std::optional<Model> model;
  std::unique_ptr<StepExecutor> executor;
  EngineOptions eo;
  eo.kv = v.stack.kv;
  if (sim) {
    const SimOptions so = sim_options(spec.device);
    executor = std::make_unique<SimExecutor>(cx.weights.config, so, static_cast<SimDevice&>(*device));
    // The pool is what fits beside the weights on the profile's memory (unless kv.num_blocks says).
    if (eo.kv.num_blocks <= 0) eo.kv.num_blocks = sim_kv_blocks(cx.weights.config, so, eo.kv.block_size);
  } else {
    model.emplace(cx.weights, *quant, *device, cx.calibration);
    executor = std::make_unique<ModelExecutor>(*model, *attention, quant->kv_dtype());
  }
  eo.seed = mix_seed(spec.seed, static_cast<std::uint64_t>(rep));
  eo.clock = cx.options.clock;
  eo.stop = [&cx] { return cx.stopping(); };
  eo.queue_timeout_s = spec.workload.queue_timeout_s;
  eo.timeout_s = spec.workload.timeout_s;
  eo.max_new_tokens = spec.workload.max_new_tokens;
  Engine engine(*executor, *scheduler, *decoder, eo);
  const std::string what = "run " + v.name + " repeat " + std::to_string(rep);
  if (cx.options.progress) log::debug(what);  // the progress line says it
  else log::info(what);
  RunResult r = engine.run(cx.requests);
  c.row.metrics = compute_metrics(r.timeline, spec.slo);
  if (cx.quality) {
    // Quality is deterministic: measured once per variant, repeated in every row.
    auto q = cx.quality->evaluate(v.name, *model, *attention, vi == 0, quant->kv_dtype());
    c.row.metrics.insert(c.row.metrics.end(), q.begin(), q.end());
  }
  c.requests = std::move(r.timeline.requests);
  for (std::size_t i = 0; i < c.requests.size(); ++i) {
    c.requests[i].output_hash = tokens_hash(r.outputs[i]);
    c.requests[i].token_times.clear();
  }
  c.row.tokens_hash = cell_tokens_hash(c.requests);
  return c;
}

// A cell in a child process (spec.isolate) or here; nullopt when interrupted.
std::optional<CellResult> run_cell_guarded(const RunContext& cx, std::size_t vi, int rep, const std::string& scratch) {
  const ExperimentSpec& spec = cx.plan.spec;
  ResultRow id;
  id.variant = cx.plan.variants[vi].name;
  id.repeat = rep;
  const auto t0 = std::chrono::steady_clock::now();
  std::optional<CellResult> c;
  if (spec.isolate) {
    c = run_cell_isolated([&] { return run_cell(cx, vi, rep); }, {spec.cell_timeout_s, spec.cell_memory_mb}, scratch,
                          [&cx] { return cx.stopping(); }, id);
  } else {
    try {
      c = run_cell(cx, vi, rep);
    } catch (const Interrupted&) {
      return std::nullopt;
    } catch (const std::exception& e) {
      c = CellResult{id, {}};
      c->row.ok = false;
      c->row.error = e.what();
    }
  }
  if (!c) return c;
  if (cx.stopping() && !c->row.ok) return std::nullopt;  // killed by the interrupt, not failed
  c->row.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!c->row.ok && cx.options.progress) std::fputs("\r\033[K", stderr);  // the error on a line of its own
  if (!c->row.ok)
    log::error("variant '" + id.variant + "' repeat " + std::to_string(rep) + " failed: " + c->row.error);
  else if (cx.quality)
    cx.quality->remember(id.variant, c->row.metrics);
  return c;
}

// "\r[3/8] variant repeat 1 · 12 s, ~20 s left" on the terminal, rewritten in place.
void show_progress(std::size_t done, std::size_t total, const std::string& variant, int rep,
                   std::chrono::steady_clock::time_point t0) {
  const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::ostringstream line;
  line << "\r\033[K[" << done << "/" << total << " cells] " << variant << " repeat " << rep << " · "
       << static_cast<long long>(el) << " s";
  if (done > 0) line << ", ~" << static_cast<long long>(el / static_cast<double>(done) * static_cast<double>(total - done)) << " s left";
  std::fputs(line.str().c_str(), stderr);
  std::fflush(stderr);
}

}  // namespace

RunOutcome run_plan(const Plan& plan, const Registry& registry, const RunOptions& options) {
  const ExperimentSpec& spec = plan.spec;
  const bool resuming = !options.resume_dir.empty();
  DeviceKind device_kind = DeviceKind::kCpu;
  parse_device_kind(spec.device.kind, device_kind);  // checked by plan_experiment
  const ModelConfig config = experiment_model_config(spec.model);
  const int threads = spec.device.threads > 0 ? spec.device.threads : static_cast<int>(std::thread::hardware_concurrency());
  // A simulated run's tokens are synthetic, from the narrower logits vocabulary (see kSimVocab).
  const std::vector<Request> requests =
      build_workload(spec.workload, device_kind == DeviceKind::kSim ? std::min(config.vocab_size, kSimVocab) : config.vocab_size);

  // The folder says what it is before any weights load: config and manifest come first.
  const bool root_existed = fs::exists(options.out_root), base_existed = fs::exists(fs::path(options.out_root) / spec.name);
  const std::string suffix = options.shard.count > 1 ? "-shard" + std::to_string(options.shard.index) + "of" +
                                                           std::to_string(options.shard.count) : "";
  ResultWriter out = resuming ? ResultWriter::reopen(options.resume_dir) : ResultWriter(options.out_root, spec.name, suffix);
  const fs::path cells_dir = fs::path(out.dir()) / "cells";
  fs::create_directories(cells_dir);
  std::string manifest;
  RunState state;
  state.shard = options.shard;
  if (resuming) {
    std::ifstream in(fs::path(out.dir()) / "manifest.json");
    std::stringstream text;
    text << in.rdbuf();
    manifest = text.str();
    state.resumes = manifest_resumes(manifest) + 1;
    state.shard = manifest_shard(manifest);
  }
  if (manifest.find("\"git_commit\"") == std::string::npos) {  // fresh, or killed before it was written
    manifest = manifest_json(plan, registry, config, requests.size(), threads);
    if (!resuming) out.write_text("config.toml", resolved_config_toml(plan));
  }
  std::vector<std::string> names;
  for (const auto& v : plan.variants) names.push_back(v.name);
  // Repeats outermost so slow drift of a shared machine spreads over all variants alike.
  const CellGrid grid = read_cells(cells_dir.string(), names, plan.repeats, state.shard, resuming);
  std::vector<std::string> notes;
  out.set_header(spec.name, spec.description, names, notes);
  write_results_from_cells(out, grid);
  for (const auto& [g, c] : grid.done) state.done.push_back({names[g.vi], g.rep});
  for (const auto& g : grid.missing) state.missing.push_back({names[g.vi], g.rep});
  auto write_state = [&] {
    out.write_text("manifest.json", manifest_with_state(manifest, state));
    std::string status;
    if (state.status == "interrupted")
      status = "Interrupted by " + state.signal + ": " + std::to_string(state.done.size()) + " of " +
               std::to_string(state.done.size() + state.missing.size()) + " cells done; `inferlab run --resume " + out.dir() +
               "` runs the rest.";
    else if (state.status == "running")
      status = "Running: " + std::to_string(state.done.size()) + " of " + std::to_string(state.done.size() + state.missing.size()) +
               " cells done.";
    out.set_status(status);
  };
  write_state();
  out.rewrite();

  // A run that cannot start (weights that do not load) leaves no folder behind; one killed
  // while loading leaves config.toml and a manifest that says "running".
  auto abandon = [&] {
    if (resuming) return;
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
  notes = {"model: " + weights.config.name +
               (sim ? " (simulated: no weights)" : spec.model.preset.empty() ? " (checkpoint)" : " (seeded random weights)") +
               ", " + std::to_string(weights.config.parameter_count()) + " parameters",
           "workload: " + std::to_string(requests.size()) + " requests" +
               (spec.workload.trace.empty() ? " (synthetic, " + spec.workload.arrival + ")" : " from " + spec.workload.trace),
           "device: " + (sim ? hw_profile(spec.device.profile).description + " x tp " + std::to_string(spec.device.tp) +
                                   " x pp " + std::to_string(spec.device.pp) + ", cost model of docs/simulation.md"
                             : make_device(device_kind, spec.device.threads)->describe()) + ", " + cpu_model(),
           std::string("cells: ") + (spec.isolate ? "each in its own process" : "in the run's process")};
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
      needs = merge_needs(needs, registry.create_quantization(v.stack.quantization.name, v.quantization, host)
                                     ->calibration_needs());
    if (needs.any() && !sim) {  // a simulated run has no weights and runs no linear
      calibration = std::make_unique<CalibrationSet>(calibrate(spec, loaded, needs, registry, threads));
      notes.push_back("calibration: " + std::to_string(calibration->tokens) + " tokens of " + spec.calibration.text +
                      " in windows of " + std::to_string(spec.calibration.seq_len) +
                      ", float-model perplexity " + std::to_string(calibration->perplexity));
    }
  }

  std::unique_ptr<QualityEvaluator> quality;
  if (spec.quality.enabled) {
    std::ifstream in(spec.quality.text, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    auto tokens = quality_tokens(text.str(), loaded.tokenizer.get(), weights.config.vocab_size, spec.quality.max_tokens,
                                 spec.model.add_bos);
    notes.push_back("quality: " + std::to_string(tokens.size()) + " tokens of " + spec.quality.text +
                    (loaded.tokenizer ? "" : " (UTF-8 bytes as ids: the model has no tokenizer)"));
    quality = std::make_unique<QualityEvaluator>(spec.quality, std::move(tokens));
    // The baseline's log-probs are the reference every variant is compared with: measured here
    // (not in a cell's child, whose memory the parent never sees), on a device dropped before
    // any fork. Cells other than the baseline's then measure only their own variant.
    const ResolvedVariant& b = plan.variants.front();
    auto device = make_device(device_kind, spec.device.threads);
    auto attention = registry.create_attention(b.stack.attention.name, b.attention, *device);
    auto quant = registry.create_quantization(b.stack.quantization.name, b.quantization, *device);
    Model model(weights, *quant, *device, calibration.get());
    quality->evaluate(b.name, model, *attention, true, quant->kv_dtype());
  }
  out.set_header(spec.name, spec.description, names, notes);
  out.rewrite();

  const RunContext cx{plan, registry, options, weights, requests, quality.get(), device_kind, calibration.get()};
  RunOutcome outcome;
  const auto t_cells = std::chrono::steady_clock::now();
  for (const GridCell& cell : grid.missing) {
    if (cx.stopping()) break;
    if (options.progress) show_progress(outcome.ran, grid.missing.size(), names[cell.vi], cell.rep, t_cells);
    auto c = run_cell_guarded(cx, cell.vi, cell.rep, (cells_dir / ("." + cell_file_name(cell.vi, cell.rep) + ".child")).string());
    if (!c) break;
    write_cell_file((cells_dir / cell_file_name(cell.vi, cell.rep)).string(), *c);
    ++outcome.ran;
    state.done.push_back({names[cell.vi], cell.rep});
    std::erase_if(state.missing, [&](const CellRef& m) { return m.variant == names[cell.vi] && m.repeat == cell.rep; });
    write_state();
    out.add(c->row, c->requests);
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
  } else {
    state.status = state.missing.empty() ? "complete" : "interrupted";
    if (!state.missing.empty()) state.signal = "a signal to a cell's process";
  }
  write_state();
  out.rewrite();
  outcome.dir = out.dir();
  outcome.rows = out.rows().size();
  for (const ResultRow& row : out.rows()) outcome.failed += !row.ok;
  return outcome;
}

}  // namespace inferlab
