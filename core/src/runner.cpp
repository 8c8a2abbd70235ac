// Plan (every variant checked before any work) and run (variant x repeat into a results folder).
#include "inferlab/runner.h"

#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>
#include <unistd.h>

#include "inferlab/calibration.h"
#include "inferlab/checkpoint.h"
#include "inferlab/engine.h"
#include "inferlab/error.h"
#include "inferlab/experiment_toml.h"
#include "inferlab/log.h"
#include "inferlab/manifest.h"
#include "inferlab/model.h"
#include "inferlab/quality.h"
#include "inferlab/report.h"
#include "inferlab/workload.h"

namespace inferlab {

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

LoadedModel load_experiment_model(const ModelSpec& spec) {
  if (!spec.preset.empty()) {
    ModelConfig c = experiment_model_config(spec);
    const double bytes = static_cast<double>(c.parameter_count()) * 4.0;
    const double avail = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGE_SIZE));
    if (bytes * 2.2 > avail)  // float weights + the variant's copy
      throw Error("model preset '" + spec.preset + "' needs about " + std::to_string(static_cast<long long>(bytes * 2.2 / (1 << 20))) +
                  " MiB for fp32 weights, this machine has " + std::to_string(static_cast<long long>(avail / (1 << 20))) +
                  " MiB; set [model] n_layers to a smaller depth");
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

Plan plan_experiment(const ExperimentSpec& spec, const Registry& registry, const ModelConfig& model) {
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
    auto quant = registry.create_quantization(v.stack.quantization.name, rv.quantization, host);
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
  return plan;
}

RunOutcome run_plan(const Plan& plan, const Registry& registry, const RunOptions& options) {
  const ExperimentSpec& spec = plan.spec;
  auto t_load = std::chrono::steady_clock::now();
  LoadedModel loaded = load_experiment_model(spec.model);
  const ModelWeights& weights = loaded.weights;
  log::info("model " + weights.config.name + ": " + std::to_string(weights.config.parameter_count()) +
            " parameters, loaded in " +
            std::to_string(std::chrono::duration<double>(std::chrono::steady_clock::now() - t_load).count()) + " s");
  std::vector<Request> requests = build_workload(spec.workload, weights.config.vocab_size);
  log::info("workload: " + std::to_string(requests.size()) + " requests");
  DeviceKind device_kind = DeviceKind::kCpu;
  parse_device_kind(spec.device.kind, device_kind);  // checked by plan_experiment
  std::unique_ptr<Device> device = make_device(device_kind, spec.device.threads);

  ResultWriter out(options.out_root, spec.name);
  std::vector<std::string> names;
  for (const auto& v : plan.variants) names.push_back(v.name);
  std::vector<std::string> notes = {
      "model: " + weights.config.name + (spec.model.preset.empty() ? " (checkpoint)" : " (seeded random weights)") +
          ", " + std::to_string(weights.config.parameter_count()) + " parameters",
      "workload: " + std::to_string(requests.size()) + " requests" +
          (spec.workload.trace.empty() ? " (synthetic, " + spec.workload.arrival + ")" : " from " + spec.workload.trace),
      "device: " + device->describe() + ", " + cpu_model()};
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
  out.set_header(spec.name, spec.description, names, notes);
  out.write_text("config.toml", resolved_config_toml(plan));
  const int threads = spec.device.threads > 0 ? spec.device.threads : static_cast<int>(std::thread::hardware_concurrency());
  out.write_text("manifest.json", manifest_json(plan, registry, weights.config, requests.size(), threads));

  std::unique_ptr<QualityEvaluator> quality;
  if (spec.quality.enabled) {
    std::ifstream in(spec.quality.text, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    auto tokens = quality_tokens(text.str(), loaded.tokenizer.get(), weights.config.vocab_size, spec.quality.max_tokens);
    notes.push_back("quality: " + std::to_string(tokens.size()) + " tokens of " + spec.quality.text +
                    (loaded.tokenizer ? "" : " (UTF-8 bytes as ids: the model has no tokenizer)"));
    out.set_header(spec.name, spec.description, names, notes);
    quality = std::make_unique<QualityEvaluator>(spec.quality, std::move(tokens));
  }

  // One calibration pass for every variant that asks (the union of their needs).
  std::unique_ptr<CalibrationSet> calibration;
  {
    CalibrationNeeds needs;
    CpuDevice host(1);
    for (const ResolvedVariant& v : plan.variants)
      needs = merge_needs(needs, registry.create_quantization(v.stack.quantization.name, v.quantization, host)
                                     ->calibration_needs());
    if (needs.any()) {
      calibration = std::make_unique<CalibrationSet>(calibrate(spec, loaded, needs, registry, threads));
      notes.push_back("calibration: " + std::to_string(calibration->tokens) + " tokens of " + spec.calibration.text +
                      " in windows of " + std::to_string(spec.calibration.seq_len) +
                      ", float-model perplexity " + std::to_string(calibration->perplexity));
      out.set_header(spec.name, spec.description, names, notes);
    }
  }

  // Repeats outermost so slow drift of a shared machine spreads over all variants alike.
  for (int rep = 0; rep < plan.repeats; ++rep) {
    for (const ResolvedVariant& v : plan.variants) {
      ResultRow row;
      row.variant = v.name;
      row.repeat = rep;
      std::vector<RequestTimeline> request_rows;
      auto t0 = std::chrono::steady_clock::now();
      try {
        auto attention = registry.create_attention(v.stack.attention.name, v.attention, *device);
        auto quant = registry.create_quantization(v.stack.quantization.name, v.quantization, *device);
        auto scheduler = registry.create_scheduler(v.stack.scheduler.name, v.scheduler, *device);
        auto decoder = registry.create_decoder(v.stack.decoding.name, v.decoding, *device);
        Model model(weights, *quant, *device, calibration.get());
        EngineOptions eo;
        eo.kv = v.stack.kv;
        eo.seed = mix_seed(spec.seed, static_cast<std::uint64_t>(rep));
        eo.clock = options.clock;
        ModelExecutor executor(model, *attention, quant->kv_dtype());
        Engine engine(executor, *scheduler, *decoder, eo);
        log::info("run " + v.name + " repeat " + std::to_string(rep));
        RunResult r = engine.run(requests);
        row.metrics = compute_metrics(r.timeline, spec.slo);
        if (quality) {
          // Quality is deterministic: measured once per variant, repeated in every row.
          auto q = quality->evaluate(v.name, model, *attention, rep == 0 && &v == &plan.variants.front(),
                                      quant->kv_dtype());
          row.metrics.insert(row.metrics.end(), q.begin(), q.end());
        }
        request_rows = std::move(r.timeline.requests);
      } catch (const std::exception& e) {
        row.ok = false;
        row.error = e.what();
        row.metrics.clear();
        log::error("variant '" + v.name + "' repeat " + std::to_string(rep) + " failed: " + e.what());
      }
      row.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      out.add(row, request_rows);
    }
  }
  RunOutcome outcome{out.dir(), out.rows().size(), 0};
  for (const ResultRow& row : out.rows()) outcome.failed += !row.ok;
  return outcome;
}

}  // namespace inferlab
