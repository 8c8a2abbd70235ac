// `inferlab calibrate` over an experiment (see inferlab/sim/sim_cost_model.h): one fit per
// distinct (attention, quantization) stack of its variants, on the real CPU executor.
#include "inferlab/engine/engine.h"
#include "inferlab/error.h"
#include "inferlab/support/log.h"
#include "inferlab/results/manifest.h"
#include "inferlab/model/model.h"
#include "inferlab/plugin/registry.h"
#include "inferlab/run/runner.h"
#include "inferlab/sim/sim_cost_model.h"

namespace inferlab {

CalibratedCostModel calibrate_plan(const Plan& plan, const Registry& registry, const CalibrationGrid& grid,
                                   const std::function<double()>& clock) {
  const ExperimentSpec& spec = plan.spec;
  if (spec.calibration.enabled)
    throw Error(spec.source_path + ": calibrate times stacks on seeded or checkpoint weights and does not run "
                "[calibration] (GPTQ/AWQ/SmoothQuant statistics); drop those variants or the section");
  const LoadedModel loaded = load_experiment_model(spec.model);
  const ModelConfig& cfg = loaded.weights.config;
  const CalibrationGrid g = clip_grid(grid, cfg);
  CpuDevice device(spec.device.threads);
  device.set_fuse(spec.device.fuse);  // the step as `run` times it on this CPU
  CalibratedCostModel out;
  out.model = cfg.name;
  out.dim = cfg.dim;
  out.hidden_dim = cfg.hidden_dim;
  out.n_layers = cfg.n_layers;
  out.n_heads = cfg.n_heads;
  out.n_kv_heads = cfg.n_kv_heads;
  out.vocab_size = cfg.vocab_size;
  out.threads = device.pool().size();
  out.machine = cpu_model();
  for (const ResolvedVariant& v : plan.variants) {
    bool seen = false;
    for (const CalibratedStack& s : out.stacks)
      seen = seen || (s.attention == v.stack.attention.name && s.quantization == v.stack.quantization.name);
    if (seen) continue;
    if (!v.stack.quantization_rules.empty())  // a fit is keyed by plugin names: rules would be lost
      throw Error(v.stack.quantization.where + ": calibrate: variant '" + v.name +
                  "' has per-layer quantization rules, which a calibrated stack (attention + quantization name) "
                  "cannot record; allowed: calibrate variants without rules");
    auto attention = registry.create_attention(v.stack.attention.name, v.attention, device);
    auto quant = registry.create_quantization(v.stack.quantization.name, v.quantization, device);
    auto decoder = registry.create_decoder(v.stack.decoding.name, v.decoding, device, &loaded.weights, attention.get());
    if (decoder->max_draft_tokens() > 0)
      throw Error("calibrate: variant '" + v.name + "' drafts (decoding '" + v.stack.decoding.name +
                  "'); calibrate its stack with a non-speculative decoder (sampling)");
    Model model(loaded.weights, *quant, device, nullptr);
    ModelExecutor executor(model, *attention, v.stack.kv.format);
    log::info("calibrate: " + v.stack.attention.name + " + " + v.stack.quantization.name + " (variant '" + v.name +
              "', " + (device.fuse() ? "fused" : "unfused") + " ops)");
    CalibratedStack s = calibrate_stack(executor, *decoder, g, clock);
    s.attention = v.stack.attention.name;
    s.quantization = v.stack.quantization.name;
    log::info("calibrate: " + std::to_string(s.points) + " points, rms relative error of the fit " +
              std::to_string(s.fit_rms_rel_error));
    out.stacks.push_back(std::move(s));
  }
  return out;
}

}  // namespace inferlab
