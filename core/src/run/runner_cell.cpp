// One variant × repeat of a run (see runner_cell.h): its device and strategies, the model or the
// simulator it runs on, the engine's run and the row's metrics; and the simulation options a
// simulated cell's device charges by.
#include "run/runner_cell.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>

#include "inferlab/device/cuda_device.h"
#include "inferlab/engine/engine.h"
#include "inferlab/error.h"
#include "inferlab/device/gpu_memory.h"
#include "inferlab/support/log.h"
#include "inferlab/model/model.h"
#include "inferlab/experiment/quantization_rules.h"
#include "inferlab/results/report.h"
#include "inferlab/sim/sim.h"

namespace inferlab {

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

namespace {

// A cell's device, strategies and executor, declared in the order they are made (and destroyed
// in reverse: the executor and model before the strategies, the device last).
struct CellParts {
  std::unique_ptr<Device> device;
  std::shared_ptr<Attention> attention;
  std::shared_ptr<Quantization> quant;
  std::shared_ptr<const SimOptions> sim_opts;  // a simulated cell only
  std::shared_ptr<Scheduler> scheduler;
  std::shared_ptr<Decoder> decoder;
  std::optional<Model> model;  // a real cell only: a simulated run never materialises the model
  std::unique_ptr<StepExecutor> executor;
  std::optional<GpuMemoryPlan> gpu_memory;  // kv.gpu_memory_fraction, or measured on a CUDA device
  EngineOptions eo;
};

// The cell's own device (and thread pool; an isolated cell makes it inside its child) and the
// variant's four strategies on it; a simulated device gets its options before the decoder, as
// a speculative draft charges its passes by the same model.
void make_strategies(const RunContext& cx, const ResolvedVariant& v, const ModelWeights& weights, CellParts& p) {
  const ExperimentSpec& spec = cx.plan.spec;
  const bool sim = cx.device_kind == DeviceKind::kSim;
  p.device = make_device(cx.device_kind, spec.device.threads, sim ? sim_device_description(spec.device) : "sim");
  if (!sim) compute_device(*p.device, "[device] fuse").set_fuse(spec.device.fuse);  // cpu or cuda ([device])
  if (spec.device.cuda_graphs)  // cuda only (validated at [device])
    compute_device(*p.device, "[device] cuda_graphs").set_cuda_graphs(true);
  p.attention = cx.registry.create_attention(v.stack.attention.name, v.attention, *p.device);
  // cuda_graphs with an attention whose steps cannot be captured would run every step eagerly
  // (graph_replays 0): refused, naming both, instead of a row that claims graphs.
  if (spec.device.cuda_graphs && !p.attention->graph_capturable())
    throw Error("[device] cuda_graphs = true: variant '" + v.name + "': attention '" + v.stack.attention.name +
                "' cannot be captured in a CUDA graph (allowed with cuda_graphs: flash)");
  p.quant = make_variant_quantization(cx.registry, v, *p.device, &weights);
  if (sim) {
    // Planned bytes are asked of the strategy on the host (its probe builds a linear there).
    CpuDevice host(1);
    p.sim_opts = std::make_shared<const SimOptions>(sim_options(spec.device, v.stack.attention.name,
                                                                v.stack.quantization.name, weights.config,
                                                                *make_variant_quantization(cx.registry, v, host, &weights),
                                                                *p.attention));
    static_cast<SimDevice&>(*p.device).set_options(p.sim_opts);
  }
  p.scheduler = cx.registry.create_scheduler(v.stack.scheduler.name, v.scheduler, *p.device);
  p.decoder = cx.registry.create_decoder(v.stack.decoding.name, v.decoding, *p.device, &weights, p.attention.get());
}

// The executor the engine steps: the simulator over the model's config, or the Model built by
// the variant's quantization; and the KV pool it gets (p.eo.kv) where the run does not say.
void make_executor(const RunContext& cx, const ResolvedVariant& v, const ModelWeights& weights, CellParts& p) {
  p.eo.kv = v.stack.kv;
  if (cx.device_kind == DeviceKind::kSim) {
    const SimOptions& so = *p.sim_opts;
    p.executor = std::make_unique<SimExecutor>(weights.config, so, static_cast<SimDevice&>(*p.device));
    // The pool is what fits beside the weights on the profile's memory (unless kv.num_blocks or
    // kv.memory_mb says); a calibrated run sizes it as the real run on this machine does (the
    // engine's rule).
    if (p.eo.kv.num_blocks <= 0 && p.eo.kv.memory_mb <= 0 && !so.calibrated)
      p.eo.kv.num_blocks = sim_kv_blocks(weights.config, so, p.eo.kv.block_size);
  } else {
    p.model.emplace(weights, *p.quant, *p.device, v.model ? nullptr : cx.calibration);
    p.model->set_layer_plan(p.decoder->layer_plan());  // layer skipping / early exit, quality included
    p.executor = std::make_unique<ModelExecutor>(*p.model, *p.attention, v.stack.kv.format);
  }
  if (p.eo.kv.gpu_memory_fraction > 0) {
    // The largest step: every prompt at once (an upper bound on what any scheduler batches).
    long long rows = 0;
    for (const Request& r : cx.requests) rows += static_cast<long long>(r.prompt.size());
    p.gpu_memory = plan_gpu_kv_pool(*p.device, p.eo.kv.gpu_memory_fraction, cx.weights.config,
                                    p.model ? p.model->weight_bytes() : 0,
                                    static_cast<int>(std::clamp<long long>(rows, 1, 1 << 16)),
                                    static_cast<int>(std::clamp<std::size_t>(cx.requests.size(), 1, 1 << 16)),
                                    p.executor->kv_bytes_per_block(p.eo.kv.block_size));
    p.eo.kv.num_blocks = p.gpu_memory->kv_blocks;
  }
}

// The row's metrics beyond the timeline's: the layer plan's counters (reset: the quality pass
// counts its own rows), a CUDA device's memory breakdown, and the variant's quality.
void add_cell_metrics(const RunContext& cx, std::size_t vi, const ModelWeights& weights, const RunResult& r,
                      CellParts& p, MetricRow& metrics) {
  const ResolvedVariant& v = cx.plan.variants[vi];
  if (LayerPlan* plan = p.decoder->layer_plan(); plan != nullptr && cx.device_kind != DeviceKind::kSim) {
    add_layer_plan_metrics(*plan, weights.config.n_layers, metrics);
    plan->reset_counters();
  }
  if (p.device->kind() == DeviceKind::kCuda) {
    // The memory breakdown; without a fraction the pool is what the engine sized.
    if (!p.gpu_memory)
      p.gpu_memory = measured_gpu_memory(cuda_memory_info(*p.device), p.model->weight_bytes(),
                                         static_cast<std::uint64_t>(r.timeline.kv_blocks_total) *
                                             p.executor->kv_bytes_per_block(p.eo.kv.block_size));
    for (auto& [name, value] : gpu_memory_metrics(*p.gpu_memory)) metrics.emplace_back(name, value);
  }
  if (cx.quality) {
    // Quality is deterministic: measured once per variant, repeated in every row.
    auto q = cx.quality->evaluate(v.name, *p.model, *p.attention, vi == 0, v.stack.kv.format);
    metrics.insert(metrics.end(), q.begin(), q.end());
  }
}

// One variant × repeat in this process. Throws on any failure.
CellResult run_cell(const RunContext& cx, std::size_t vi, int rep) {
  const ExperimentSpec& spec = cx.plan.spec;
  const ResolvedVariant& v = cx.plan.variants[vi];
  CellResult c;
  c.row.variant = v.name;
  c.row.repeat = rep;
  const ModelWeights& weights = cx.variant_weights[vi] ? *cx.variant_weights[vi] : cx.weights;
  CellParts p;
  make_strategies(cx, v, weights, p);
  make_executor(cx, v, weights, p);
  p.eo.seed = mix_seed(spec.seed, static_cast<std::uint64_t>(rep));
  p.eo.clock = cx.options.clock;
  p.eo.stop = [&cx] { return cx.stopping(); };
  p.eo.queue_timeout_s = spec.workload.queue_timeout_s;
  p.eo.timeout_s = spec.workload.timeout_s;
  p.eo.max_new_tokens = spec.workload.max_new_tokens;
  Engine engine(*p.executor, *p.scheduler, *p.decoder, p.eo);
  const std::string what = "run " + v.name + " repeat " + std::to_string(rep);
  if (cx.options.progress) log::debug(what);  // the progress line says it
  else log::info(what);
  RunResult r = engine.run(cx.requests);
  c.row.metrics = compute_metrics(r.timeline, spec.slo);
  add_cell_metrics(cx, vi, weights, r, p, c.row.metrics);
  c.requests = std::move(r.timeline.requests);
  c.steps = sample_steps(r.timeline.steps);
  for (std::size_t i = 0; i < c.requests.size(); ++i) {
    c.requests[i].output_hash = tokens_hash(r.outputs[i]);
    std::vector<double>().swap(c.requests[i].token_times);  // its memory back, not only its size
  }
  c.row.tokens_hash = cell_tokens_hash(c.requests);
  return c;
}

}  // namespace

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

}  // namespace inferlab
