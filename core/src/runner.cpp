// Plan (every variant checked before any work) and run (variant x repeat into a results folder).
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
#include "inferlab/variant_quantization.h"
#include "inferlab/workload.h"
#include "runner_models.h"

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

SimOptions sim_options(const DeviceSpec& device, const std::string& attention, const std::string& quantization) {
  SimOptions o;
  o.tp = device.tp;
  o.pp = device.pp;
  if (is_calibrated_profile(device.profile)) {
    const std::string path = device.profile.substr(kCalibratedProfile.size());
    o.calibrated = std::make_shared<const CalibratedStack>(read_cost_model(path).stack(attention, quantization));
    o.profile.name = "calibrated";
    o.profile.description = sim_device_description(device);
    return o;
  }
  o.profile = hw_profile(device.profile);
  return o;
}

SimOptions sim_options(const DeviceSpec& device, const std::string& attention_name, const std::string& quantization_name,
                       const ModelConfig& model, Quantization& quantization, const Attention& attention) {
  SimOptions o = sim_options(device, attention_name, quantization_name);
  if (o.calibrated) return o;  // the measured stack already holds both strategies' costs
  o.linears = sim_linears(quantization, model, o.weight_bytes);
  const AttentionTraffic t = sim_attention_traffic(attention, model, attention_name);
  o.attn_score_bytes = t.score_bytes;
  o.attn_partial_bytes = t.partial_bytes;
  o.attn_partial_bytes_per_key = t.partial_bytes_per_key;
  o.attn_partial_max_rows = t.partial_max_rows;
  return o;
}

std::string sim_device_description(const DeviceSpec& device) {
  if (!is_calibrated_profile(device.profile)) return hw_profile(device.profile).description;
  const std::string path = device.profile.substr(kCalibratedProfile.size());
  const CalibratedCostModel m = read_cost_model(path);
  return "calibrated cost model of " + m.model + " on " + m.machine + ", " + std::to_string(m.threads) + " threads, " +
         m.clock + " clock (" + path + ")";
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

Plan plan_experiment(const ExperimentSpec& spec, const Registry& registry, const ModelConfig& model,
                     std::uint64_t max_memory_bytes) {
  Plan plan;
  plan.spec = spec;
  plan.repeats = spec.repeats;
#if !INFERLAB_HAVE_CUDA
  // Before any plugin is asked: in a build without CUDA no plugin lists the device, and the
  // first plugin's refusal would hide the reason.
  if (spec.device.kind == "cuda") {
    std::string reason;
    cuda_device_visible(reason);
    throw Error(spec.source_path + ": [device] kind = \"cuda\", but " + reason + "; allowed on this machine: cpu, sim");
  }
#endif
  for (const Variant& v : spec.variants) {
    ResolvedVariant rv{v.name, v.stack, {}, {}, {}, {}, v.model, v.model_where};
    // A substituted model: its shape is what the plugins are asked about.
    const ModelConfig vmodel = v.model ? substituted_model_config(spec, v, model) : model;
    for (PluginKind k : kStackKinds) {
      const PluginChoice& ch = v.stack.choice(k);
      const std::string where = ch.where + ": variant '" + v.name + "'";
      rv.params(k) = registry.resolve(k, ch.name, ch.params, where, fs::path(spec.source_path).parent_path().string());
    }
    // The [kv] format must fit the model (int4 group size, f32 layers) and be readable by the
    // attention plugin (checked with the other plugin checks below). The quantization strategy
    // is made on a one-thread host device: planning allocates nothing.
    if (const std::string problem = kv_format_problem(v.stack.kv.format, model); !problem.empty())
      throw Error(v.stack.kv_where + ": variant '" + v.name + "': kv.dtype '" + v.stack.kv.format.name() +
                  "' cannot run this: " + problem);
    // Allowed, but it saves no memory over int8 (a small head_dim: stories260K has 8).
    if (const std::string waste = kv_format_waste(v.stack.kv.format, model); !waste.empty())
      log::warn(v.stack.kv_where + ": variant '" + v.name + "': " + waste);
    if (!v.stack.kv.format.all_f32() && spec.device.kind != "cpu")
      throw Error(v.stack.kv_where + ": variant '" + v.name + "': kv.dtype '" + v.stack.kv.format.name() +
                  "' is stored on the CPU only (device kind \"" + spec.device.kind + "\"; allowed there: f32)");
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
    if (quant->calibration_needs().any() && v.model)
      throw Error(v.model_where + ": variant '" + v.name + "': quantization '" + v.stack.quantization.name +
                  "' calibrates on the baseline model's activations, which do not fit a substituted model; allowed: "
                  "a quantization without calibration for a variant with its own model");
    // A simulated run builds no linears, so it never calibrates (and refuses [calibration] below).
    if (quant->calibration_needs().any() && !spec.calibration.enabled && spec.device.kind != "sim")
      throw Error(v.stack.quantization.where + ": variant '" + v.name + "': quantization '" +
                  v.stack.quantization.name +
                  "' calibrates on the float model's activations and needs a [calibration] section "
                  "(text, tokens, seq_len, seed)");
    plan_quantization_rules(spec, registry, vmodel, device_kind, rv);
    {  // the linears no rule took are the variant's method's
      std::vector<LinearSlot> own;
      std::set<std::string> ruled;
      for (const auto& names : rv.rule_assignment.by_rule) ruled.insert(names.begin(), names.end());
      for (const LinearSlot& l : model_linears(vmodel))
        if (!ruled.count(l.name)) own.push_back(l);
      check_group_size_fits(rv.quantization, own, v.stack.quantization.where + ": variant '" + v.name +
                                                      "': quantization '" + v.stack.quantization.name + "'");
    }
    if (device_kind == DeviceKind::kSim && !is_calibrated_profile(spec.device.profile)) {
      // The simulator charges each strategy by what it declares: one it cannot charge is
      // refused here, with the reason, not silently costed as the baseline.
      const auto checked = [&](const PluginChoice& ch, PluginKind k, auto&& fn) {
        try {
          fn();
        } catch (const Error& e) {
          throw Error(ch.where + ": variant '" + v.name + "': " + plugin_kind_name(k) + " '" + ch.name +
                      "' cannot run this: " + e.what());
        }
      };
      checked(v.stack.quantization, PluginKind::kQuantization, [&] {
        sim_linears(*make_variant_quantization(registry, rv, host), vmodel);
      });
      checked(v.stack.attention, PluginKind::kAttention, [&] {
        sim_attention_traffic(*registry.create_attention(v.stack.attention.name, rv.attention, host), vmodel,
                              v.stack.attention.name);
      });
    }
    for (PluginKind k : kStackKinds) {
      const PluginChoice& ch = v.stack.choice(k);
      SupportQuery q{vmodel, device_kind, v.stack.kv.format, rv.params(k)};
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
  if (spec.calibration.enabled) {  // the section acts only through a method that calibrates
    if (spec.device.kind == "sim")
      throw Error(spec.source_path + ": [calibration] does nothing on kind = \"sim\": a simulated run builds no "
                                     "linears, so no method calibrates; drop the section or use kind = \"cpu\" or \"cuda\"");
    CpuDevice host(1);
    bool any = false;
    for (const ResolvedVariant& rv : plan.variants)
      any = any || make_variant_quantization(registry, rv, host)->calibration_needs().any();
    if (!any)
      throw Error(spec.source_path + ": [calibration] does nothing: no variant's quantization (nor a rule's "
                  "method) calibrates; it feeds gptq, awq and smoothquant: drop the section or use one of them");
  }
  if (spec.device.kind == "sim" && is_calibrated_profile(spec.device.profile)) {
    // The fit must be of this model's shape and of every variant's stack.
    const CalibratedCostModel cm = read_cost_model(spec.device.profile.substr(kCalibratedProfile.size()));
    cm.check_model(model, spec.source_path + ": [device] profile");
    for (const Variant& v : spec.variants) try {
        cm.stack(v.stack.attention.name, v.stack.quantization.name);
      } catch (const Error& e) {
        throw Error(spec.source_path + ": [device] profile: variant '" + v.name + "': " + e.what());
      }
  }
  if (spec.device.kind == "sim" && spec.quality.enabled)
    throw Error("[quality] needs real logits; a simulated run (device kind \"sim\") has none: drop [quality] or use cpu");
  plan.memory = estimate_run_memory(plan, registry, model);
  // The least of physical memory, RLIMIT_AS and the cgroup limits (memory_limit): a run the
  // process cannot allocate is refused here rather than failing in every cell.
  const MemoryLimit machine = memory_limit();
  // --max-memory may exceed physical memory (swap), not a limit the kernel enforces.
  const std::uint64_t limit = max_memory_bytes == 0 ? machine.bytes
                              : machine.enforced  ? std::min(max_memory_bytes, machine.bytes)
                                                  : max_memory_bytes;
  if (plan.memory.total() > limit)
    throw Error(spec.source_path + ": the run needs about " + plan.memory.describe() + "; " +
                (limit == max_memory_bytes ? "--max-memory allows " + format_bytes(limit) : machine.what) +
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
  const std::vector<const ModelWeights*>& variant_weights;  // per variant; null = `weights`
  const std::vector<Request>& requests;
  QualityEvaluator* quality;
  DeviceKind device_kind;
  const CalibrationSet* calibration;  // null when no variant calibrates
  bool stopping() const { return options.interrupted && options.interrupted() != 0; }
};

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

// One variant × repeat in this process. The device (and its thread pool) is made here, so an
// isolated cell makes it inside its child. Throws on any failure.
CellResult run_cell(const RunContext& cx, std::size_t vi, int rep) {
  const ExperimentSpec& spec = cx.plan.spec;
  const ResolvedVariant& v = cx.plan.variants[vi];
  CellResult c;
  c.row.variant = v.name;
  c.row.repeat = rep;
  const ModelWeights& weights = cx.variant_weights[vi] ? *cx.variant_weights[vi] : cx.weights;
  const bool sim = cx.device_kind == DeviceKind::kSim;
  std::unique_ptr<Device> device = sim ? std::make_unique<SimDevice>(sim_device_description(spec.device))
                                       : make_device(cx.device_kind, spec.device.threads);
  device->set_fuse(spec.device.fuse);  // cpu only (validated at the [device] line)
  auto attention = cx.registry.create_attention(v.stack.attention.name, v.attention, *device);
  auto quant = make_variant_quantization(cx.registry, v, *device, &weights);
  std::shared_ptr<const SimOptions> sim_opts;
  if (sim) {  // before the decoder: a speculative draft charges its passes by the same model
    // Planned bytes are asked of the strategy on the host (its probe builds a linear there).
    CpuDevice host(1);
    sim_opts = std::make_shared<const SimOptions>(sim_options(spec.device, v.stack.attention.name,
                                                              v.stack.quantization.name, weights.config,
                                                              *make_variant_quantization(cx.registry, v, host, &weights),
                                                              *attention));
    static_cast<SimDevice&>(*device).set_options(sim_opts);
  }
  auto scheduler = cx.registry.create_scheduler(v.stack.scheduler.name, v.scheduler, *device);
  auto decoder = cx.registry.create_decoder(v.stack.decoding.name, v.decoding, *device, &weights, attention.get());
  // A simulated run never materialises the model: the executor needs only its config.
  std::optional<Model> model;
  std::unique_ptr<StepExecutor> executor;
  EngineOptions eo;
  eo.kv = v.stack.kv;
  if (sim) {
    const SimOptions& so = *sim_opts;
    executor = std::make_unique<SimExecutor>(weights.config, so, static_cast<SimDevice&>(*device));
    // The pool is what fits beside the weights on the profile's memory (unless kv.num_blocks or
    // kv.memory_mb says); a calibrated run sizes it as the real run on this machine does (the
    // engine's rule).
    if (eo.kv.num_blocks <= 0 && eo.kv.memory_mb <= 0 && !so.calibrated)
      eo.kv.num_blocks = sim_kv_blocks(weights.config, so, eo.kv.block_size);
  } else {
    model.emplace(weights, *quant, *device, v.model ? nullptr : cx.calibration);
    model->set_layer_plan(decoder->layer_plan());  // layer skipping / early exit, quality included
    executor = std::make_unique<ModelExecutor>(*model, *attention, v.stack.kv.format);
  }
  std::optional<GpuMemoryPlan> gpu_memory;
  if (eo.kv.gpu_memory_fraction > 0) {
    // The largest step: every prompt at once (an upper bound on what any scheduler batches).
    long long rows = 0;
    for (const Request& r : cx.requests) rows += static_cast<long long>(r.prompt.size());
    gpu_memory = plan_gpu_kv_pool(*device, eo.kv.gpu_memory_fraction, cx.weights.config, model ? model->weight_bytes() : 0,
                                  static_cast<int>(std::clamp<long long>(rows, 1, 1 << 16)),
                                  static_cast<int>(std::clamp<std::size_t>(cx.requests.size(), 1, 1 << 16)),
                                  executor->kv_bytes_per_block(eo.kv.block_size));
    eo.kv.num_blocks = gpu_memory->kv_blocks;
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
  if (LayerPlan* plan = decoder->layer_plan(); plan != nullptr && !sim) {
    add_layer_plan_metrics(*plan, weights.config.n_layers, c.row.metrics);
    plan->reset_counters();  // the quality pass below counts its own rows
  }
  if (device->kind() == DeviceKind::kCuda) {
    // The memory breakdown; without a fraction the pool is what the engine sized.
    if (!gpu_memory) gpu_memory = measured_gpu_memory(cuda_memory_info(*device), model->weight_bytes(),
                                                      static_cast<std::uint64_t>(r.timeline.kv_blocks_total) *
                                                          executor->kv_bytes_per_block(eo.kv.block_size));
    for (auto& [name, value] : gpu_memory_metrics(*gpu_memory)) c.row.metrics.emplace_back(name, value);
  }
  if (cx.quality) {
    // Quality is deterministic: measured once per variant, repeated in every row.
    auto q = cx.quality->evaluate(v.name, *model, *attention, vi == 0, v.stack.kv.format);
    c.row.metrics.insert(c.row.metrics.end(), q.begin(), q.end());
  }
  c.requests = std::move(r.timeline.requests);
  c.steps = sample_steps(r.timeline.steps);
  for (std::size_t i = 0; i < c.requests.size(); ++i) {
    c.requests[i].output_hash = tokens_hash(r.outputs[i]);
    std::vector<double>().swap(c.requests[i].token_times);  // its memory back, not only its size
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
  CellPredictor predictor(plan, registry, options.predict, weights.config, device_kind, requests);
  RunOutcome outcome;
  std::vector<std::string> run_faults;  // cells whose child could not hand over a result
  const auto t_cells = std::chrono::steady_clock::now();
  ProgressTotals totals;
  for (const GridCell& cell : grid.missing) {
    if (cx.stopping()) break;
    if (options.progress) show_progress(outcome.ran, grid.missing.size(), names[cell.vi], cell.rep, t_cells, totals);
    auto c = run_cell_guarded(cx, cell.vi, cell.rep, (cells_dir / ("." + cell_file_name(cell.vi, cell.rep) + ".child")).string());
    if (!c) break;
    predictor.add(cell.vi, *c);  // outside the cell's timed region: its pred_* columns
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
