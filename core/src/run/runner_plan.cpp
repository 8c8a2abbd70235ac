// Plan: every variant checked before any work (see inferlab/run/runner.h). plan_experiment runs its
// stages in order: each variant resolved and checked against the model and device, then the
// workload files, the [calibration] and simulation sections, and the run's memory.
#include <algorithm>
#include <filesystem>
#include <set>

#include "inferlab/device/cuda_device.h"
#include "inferlab/error.h"
#include "inferlab/formats/formats.h"
#include "inferlab/kv/kv_storage.h"
#include "inferlab/device/gpu_memory.h"
#include "inferlab/support/log.h"
#include "inferlab/experiment/quantization_rules.h"
#include "inferlab/run/runner.h"
#include "inferlab/sim/sim.h"
#include "inferlab/workload/workload.h"
#include "run/runner_models.h"

namespace inferlab {

namespace fs = std::filesystem;

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

namespace {

// Reads the trace and lengths files through, so a malformed row is a located error at plan
// time (validate and run alike), before any weights are loaded.
void check_workload_files(const WorkloadSpec& w) {
  if (!w.trace.empty()) read_trace(w.trace, w.format);
  if (!w.lengths_file.empty() && (w.prompt_len.dist == "trace" || w.output_len.dist == "trace"))
    read_lengths_file(w.lengths_file);
}

// Throws for kind = "cuda" in a build without CUDA, before any plugin is asked: there no plugin
// lists the device, and the first plugin's refusal would hide the reason.
void refuse_cuda_without_cuda_build([[maybe_unused]] const ExperimentSpec& spec) {
#if !INFERLAB_HAVE_CUDA
  if (spec.device.kind == DeviceKind::kCuda) {
    std::string reason;
    cuda_device_visible(reason);
    throw Error(spec.source_path + ": [device] kind = \"cuda\", but " + reason + "; allowed on this machine: cpu, sim");
  }
#endif
}

// The variant's plugin parameters, type-checked with defaults filled (Error at the choice's line).
ResolvedVariant resolve_variant(const ExperimentSpec& spec, const Registry& registry, const Variant& v) {
  ResolvedVariant rv{v.name, v.stack, {}, {}, {}, {}, v.model, v.model_where};
  for (PluginKind k : kStackKinds) {
    const PluginChoice& ch = v.stack.choice(k);
    const std::string where = ch.where + ": variant '" + v.name + "'";
    rv.params(k) = registry.resolve(k, ch.name, ch.params, where, fs::path(spec.source_path).parent_path().string());
  }
  return rv;
}

// The [kv] format must fit the model (int4 group size, f32 layers) and the device's KV storage
// (kv_storage_problem); whether the attention plugin reads it is a plugin check. Warns when it
// is allowed but saves no memory over int8 (a small head_dim: stories260K has 8).
void check_kv_format(const ExperimentSpec& spec, const Variant& v, const ModelConfig& model) {
  if (const std::string problem = kv_format_problem(v.stack.kv.format, model); !problem.empty())
    throw Error(v.stack.kv_where + ": variant '" + v.name + "': kv.dtype '" + v.stack.kv.format.name() +
                "' cannot run this: " + problem);
  if (const std::string waste = kv_format_waste(v.stack.kv.format, model); !waste.empty())
    log::warn(v.stack.kv_where + ": variant '" + v.name + "': " + waste);
  if (const std::string problem = kv_storage_problem(v.stack.kv.format, model, spec.device.kind); !problem.empty())
    throw Error(v.stack.kv_where + ": variant '" + v.name + "': " + problem);
}

// The variant's own quantization (made on a one-thread host device: planning allocates nothing)
// and its rules: the method's constructor accepts the parameters, calibration is possible, the
// rules are planned against `vmodel`, and the group size fits the linears no rule took.
void check_variant_quantization(const ExperimentSpec& spec, const Registry& registry, const Variant& v,
                                const ModelConfig& vmodel, DeviceKind device_kind, ResolvedVariant& rv) {
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
  if (quant->calibration_needs().any() && !spec.calibration.enabled && spec.device.kind != DeviceKind::kSim)
    throw Error(v.stack.quantization.where + ": variant '" + v.name + "': quantization '" +
                v.stack.quantization.name +
                "' calibrates on the float model's activations and needs a [calibration] section "
                "(text, tokens, seq_len, seed)");
  plan_quantization_rules(spec, registry, vmodel, device_kind, rv);
  // The linears no rule took are the variant's method's.
  std::vector<LinearSlot> own;
  std::set<std::string> ruled;
  for (const auto& names : rv.rule_assignment.by_rule) ruled.insert(names.begin(), names.end());
  for (const LinearSlot& l : model_linears(vmodel))
    if (!ruled.count(l.name)) own.push_back(l);
  check_group_size_fits(rv.quantization, own, v.stack.quantization.where + ": variant '" + v.name +
                                                  "': quantization '" + v.stack.quantization.name + "'");
}

// The simulator charges each strategy by what it declares: one it cannot charge is refused
// here, with the reason, not silently costed as the baseline.
void check_simulator_charges(const Registry& registry, const Variant& v, const ResolvedVariant& rv,
                             const ModelConfig& vmodel) {
  CpuDevice host(1);
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

// Each plugin of the stack asked whether it supports this model, device and KV format.
void check_plugin_support(const Registry& registry, const Variant& v, const ResolvedVariant& rv,
                          const ModelConfig& vmodel, DeviceKind device_kind) {
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
}

// One variant resolved and checked against the model it runs (a substituted model's shape is
// what the plugins are asked about) on the experiment's device.
ResolvedVariant plan_variant(const ExperimentSpec& spec, const Registry& registry, const ModelConfig& model,
                             const Variant& v) {
  const ModelConfig vmodel = v.model ? substituted_model_config(spec, v, model) : model;
  ResolvedVariant rv = resolve_variant(spec, registry, v);
  check_kv_format(spec, v, model);
  const DeviceKind device_kind = spec.device.kind;
  check_variant_quantization(spec, registry, v, vmodel, device_kind, rv);
  if (device_kind == DeviceKind::kSim && !is_calibrated_profile(spec.device.profile))
    check_simulator_charges(registry, v, rv, vmodel);
  check_plugin_support(registry, v, rv, vmodel, device_kind);
  return rv;
}

// [calibration] acts only through a method that calibrates, and never on a simulated run.
void check_calibration_section(const ExperimentSpec& spec, const Registry& registry,
                               const std::vector<ResolvedVariant>& variants) {
  if (!spec.calibration.enabled) return;
  if (spec.device.kind == DeviceKind::kSim)
    throw Error(spec.source_path + ": [calibration] does nothing on kind = \"sim\": a simulated run builds no "
                                   "linears, so no method calibrates; drop the section or use kind = \"cpu\" or \"cuda\"");
  CpuDevice host(1);
  bool any = false;
  for (const ResolvedVariant& rv : variants)
    any = any || make_variant_quantization(registry, rv, host)->calibration_needs().any();
  if (!any)
    throw Error(spec.source_path + ": [calibration] does nothing: no variant's quantization (nor a rule's "
                "method) calibrates; it feeds gptq, awq and smoothquant: drop the section or use one of them");
}

// A simulated run: a calibrated profile's fit must be of this model's shape and of every
// variant's stack; [quality] needs real logits, which it has none of.
void check_simulation(const ExperimentSpec& spec, const ModelConfig& model) {
  if (spec.device.kind == DeviceKind::kSim && is_calibrated_profile(spec.device.profile)) {
    const CalibratedCostModel cm = read_cost_model(spec.device.profile.substr(kCalibratedProfile.size()));
    cm.check_model(model, spec.source_path + ": [device] profile");
    for (const Variant& v : spec.variants) try {
        cm.stack(v.stack.attention.name, v.stack.quantization.name);
      } catch (const Error& e) {
        throw Error(spec.source_path + ": [device] profile: variant '" + v.name + "': " + e.what());
      }
  }
  if (spec.device.kind == DeviceKind::kSim && spec.quality.enabled)
    throw Error("[quality] needs real logits; a simulated run (device kind \"sim\") has none: drop [quality] or use cpu");
}

// The least of physical memory, RLIMIT_AS and the cgroup limits (memory_limit): a run the
// process cannot allocate is refused here rather than failing in every cell.
void check_memory_fits(const ExperimentSpec& spec, const MemoryEstimate& memory, std::uint64_t max_memory_bytes) {
  const MemoryLimit machine = memory_limit();
  // --max-memory may exceed physical memory (swap), not a limit the kernel enforces.
  const std::uint64_t limit = max_memory_bytes == 0 ? machine.bytes
                              : machine.enforced  ? std::min(max_memory_bytes, machine.bytes)
                                                  : max_memory_bytes;
  if (memory.total() > limit)
    throw Error(spec.source_path + ": the run needs about " + memory.describe() + "; " +
                (limit == max_memory_bytes ? "--max-memory allows " + format_bytes(limit) : machine.what) +
                "; lower [model] n_layers, the workload's requests or lengths, or kv.num_blocks, or store fewer "
                "bits per weight (quantization)");
}

}  // namespace

Plan plan_experiment(const ExperimentSpec& spec, const Registry& registry, const ModelConfig& model,
                     std::uint64_t max_memory_bytes) {
  Plan plan;
  plan.spec = spec;
  plan.repeats = spec.repeats;
  refuse_cuda_without_cuda_build(spec);
  for (const Variant& v : spec.variants) plan.variants.push_back(plan_variant(spec, registry, model, v));
  check_workload_files(spec.workload);
  check_calibration_section(spec, registry, plan.variants);
  check_simulation(spec, model);
  plan.memory = estimate_run_memory(plan, registry, model);
  check_memory_fits(spec, plan.memory, max_memory_bytes);
  return plan;
}

}  // namespace inferlab
