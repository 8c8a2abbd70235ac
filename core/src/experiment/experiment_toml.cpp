// config.toml of a results folder: the experiment with every default and plugin parameter
// written out (see experiment_toml.h). test_resolved_config checks it reloads to the same spec.
#include "inferlab/experiment/experiment_toml.h"

#include <charconv>
#include <sstream>

#include "inferlab/results/report.h"

namespace inferlab {

namespace {

// A float as TOML that reads back to the same double: the shortest round-trip digits, with a
// ".0" when they look like an integer (so a float parameter stays a float).
std::string toml_float(double d) {
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, d);
  std::string out(buf, res.ptr);
  if (out.find_first_of(".eEn") == std::string::npos) out += ".0";  // not 1e+20, inf, nan
  return out;
}

std::string toml_value(const ParamValue& v) {
  if (const double* d = std::get_if<double>(&v)) return toml_float(*d);
  if (const std::string* str = std::get_if<std::string>(&v)) return json_quote(*str);
  return param_value_to_string(v);
}

// A variant's quantization rules, each method's parameters resolved (defaults filled).
std::string rules_toml(const ResolvedVariant& v) {
  std::ostringstream t;
  t << "[";
  const auto& rules = v.stack.quantization_rules;
  for (std::size_t r = 0; r < rules.size(); ++r) {
    t << (r ? ", " : "") << "{ ";
    if (!rules[r].match.empty()) t << "match = " << json_quote(rules[r].match) << ", ";
    if (rules[r].layers.kind != LayerSelector::Kind::kAny) t << "layers = " << rules[r].layers.toml() << ", ";
    t << "method = { name = " << json_quote(rules[r].method);
    if (r < v.rule_params.size())
      for (const auto& [pk, pv] : v.rule_params[r].values()) t << ", " << pk << " = " << toml_value(pv);
    t << " } }";
  }
  t << "]";
  return t.str();
}

}  // namespace

std::string resolved_config_toml(const Plan& plan) {
  const auto& s = plan.spec;
  std::ostringstream t;
  t << "# Fully resolved by inferlab from " << s.source_path << "\n";
  for (const auto& o : s.overrides) t << "# --set " << o << "\n";
  t << "\n[experiment]\nname = " << json_quote(s.name) << "\ndescription = " << json_quote(s.description)
    << "\nseed = " << s.seed << "\nrepeats = " << plan.repeats << "\nisolate = " << (s.isolate ? "true" : "false")
    << "\ncell_timeout_s = " << s.cell_timeout_s << "\ncell_memory_mb = " << s.cell_memory_mb << "\n\n[model]\n";
  if (!s.model.preset.empty()) t << "preset = " << json_quote(s.model.preset) << "\n";
  if (!s.model.path.empty()) t << "path = " << json_quote(s.model.path) << "\nformat = " << json_quote(s.model.format) << "\n";
  if (!s.model.tokenizer.empty()) t << "tokenizer = " << json_quote(s.model.tokenizer) << "\n";
  if (s.model.n_layers) t << "n_layers = " << s.model.n_layers << "\n";
  if (s.model.add_bos) t << "add_bos = " << (*s.model.add_bos ? "true" : "false") << "\n";
  // The weights seed only where it seeds something (a preset's weights on a real device): the
  // parser refuses it elsewhere, and this file must reload.
  if (!s.model.preset.empty() && s.device.kind != DeviceKind::kSim) t << "seed = " << s.model.seed << "\n";
  t << "\n[device]\nkind = " << json_quote(device_kind_name(s.device.kind))
    << "\nthreads = " << s.device.threads;
  if (s.device.kind != DeviceKind::kSim) t << "\nfuse = " << (s.device.fuse ? "true" : "false");
  if (s.device.cuda_graphs) t << "\ncuda_graphs = true";
  if (s.device.kind == DeviceKind::kSim) t << "\nprofile = " << json_quote(s.device.profile) << "\ntp = " << s.device.tp << "\npp = " << s.device.pp;
  t << "\n\n";
  if (!s.plugin_paths.empty()) {
    t << "[plugins]\npaths = [";
    for (std::size_t i = 0; i < s.plugin_paths.size(); ++i) t << (i ? ", " : "") << json_quote(s.plugin_paths[i]);
    t << "]\n\n";
  }
  t << "[workload]\n";
  const auto& w = s.workload;
  // Only the keys that act on this workload (experiment_inert_keys.cpp refuses the others).
  if (!w.trace.empty()) {
    t << "trace = " << json_quote(w.trace) << "\nformat = " << json_quote(w.format) << "\n";
    if (!w.trace_model.empty()) t << "trace_model = " << json_quote(w.trace_model) << "\n";
    if (!w.trace_log_type.empty()) t << "trace_log_type = " << json_quote(w.trace_log_type) << "\n";
    t << "prefix_block_tokens = " << w.prefix_block_tokens << "\n";
  } else {
    auto len = [](const LengthSpec& l) {
      std::ostringstream o;
      o << "{ dist = \"" << l.dist << "\"";
      if (l.dist == "fixed") o << ", value = " << l.value;
      if (l.dist == "lognormal") o << ", mean = " << toml_float(l.mean) << ", sigma = " << toml_float(l.sigma);
      if (l.dist == "uniform" || l.dist == "lognormal") o << ", min = " << l.min << ", max = " << l.max;
      o << " }";
      return o.str();
    };
    t << "num_requests = " << w.num_requests << "\narrival = " << json_quote(w.arrival) << "\n";
    if (w.arrival != "all_at_once") t << "rate = " << toml_float(w.rate) << "\n";
    if (w.arrival == "gamma") t << "burstiness = " << toml_float(w.burstiness) << "\n";
    t << "prompt_len = " << len(w.prompt_len) << "\noutput_len = " << len(w.output_len) << "\n";
    if (!w.lengths_file.empty()) t << "lengths_file = " << json_quote(w.lengths_file) << "\n";
    t << "shared_prefix = " << w.shared_prefix << "\n";
  }
  if (!w.trace.empty() || w.arrival != "all_at_once") t << "time_scale = " << toml_float(w.time_scale) << "\n";
  auto floats = [](const std::vector<double>& xs) {
    std::string out = "[";
    for (std::size_t i = 0; i < xs.size(); ++i) out += (i ? ", " : "") + toml_float(xs[i]);
    return out + "]";
  };
  t << "limit = " << w.limit << "\nmax_prompt = " << w.max_prompt << "\nmax_output = " << w.max_output
    << "\nseed = " << w.seed << "\n";
  if (!w.class_mix.empty()) t << "class_mix = " << floats(w.class_mix) << "\n";
  t << "queue_timeout_s = " << toml_float(w.queue_timeout_s) << "\ntimeout_s = " << toml_float(w.timeout_s)
    << "\nmax_new_tokens = " << w.max_new_tokens << "\n";
  const SloSpec& slo = s.slo;
  if (slo.ttft_ms || slo.tpot_ms || slo.e2e_ms || !slo.class_ttft_ms.empty() || !slo.class_tpot_ms.empty() ||
      !slo.class_e2e_ms.empty()) {
    t << "\n[slo]\nttft_ms = " << toml_float(slo.ttft_ms) << "\ntpot_ms = " << toml_float(slo.tpot_ms)
      << "\ne2e_ms = " << toml_float(slo.e2e_ms) << "\n";
    if (!slo.class_ttft_ms.empty()) t << "class_ttft_ms = " << floats(slo.class_ttft_ms) << "\n";
    if (!slo.class_tpot_ms.empty()) t << "class_tpot_ms = " << floats(slo.class_tpot_ms) << "\n";
    if (!slo.class_e2e_ms.empty()) t << "class_e2e_ms = " << floats(slo.class_e2e_ms) << "\n";
  }
  if (s.quality.enabled)
    t << "\n[quality]\ntext = " << json_quote(s.quality.text) << "\nmax_tokens = " << s.quality.max_tokens
      << "\ncontext = " << s.quality.context << "\n";
  if (s.calibration.enabled)
    t << "\n[calibration]\ntext = " << json_quote(s.calibration.text) << "\ntokens = " << s.calibration.tokens
      << "\nseq_len = " << s.calibration.seq_len << "\nseed = " << s.calibration.seed << "\n";
  auto stack = [&](const ResolvedVariant& v) {
    for (PluginKind k : kStackKinds) {
      t << stack_key(k) << " = { name = " << json_quote(v.stack.choice(k).name);
      for (const auto& [pk, pv] : v.params(k).values()) t << ", " << pk << " = " << toml_value(pv);
      if (k == PluginKind::kQuantization && !v.stack.quantization_rules.empty()) t << ", rules = " << rules_toml(v);
      t << " }\n";
    }
    t << "kv = { enabled = " << (v.stack.kv.enabled ? "true" : "false") << ", block_size = " << v.stack.kv.block_size;
    if (v.stack.kv.gpu_memory_fraction > 0)  // the two are exclusive: the fraction, when set, is the setting
      t << ", gpu_memory_fraction = " << toml_value(ParamValue(v.stack.kv.gpu_memory_fraction));
    else
      t << ", num_blocks = " << v.stack.kv.num_blocks;
    t
      << ", reservation = \"" << kv_reservation_name(v.stack.kv.reservation)
      << "\", prefix_caching = " << (v.stack.kv.prefix_caching ? "true" : "false") << ", dtype = \""
      << v.stack.kv.format.dtype_name() << "\"";
    // The shape keys of a narrower cache (refused where they shape nothing: group_size without
    // an int8/int4 side, the f32 layers on an f32 cache).
    if (v.stack.kv.format.quantized()) t << ", group_size = " << v.stack.kv.format.group_size;
    if (!v.stack.kv.format.all_f32())
      t << ", f32_first_layers = " << v.stack.kv.format.f32_first_layers
        << ", f32_last_layers = " << v.stack.kv.format.f32_last_layers;
    t << ", memory_mb = " << v.stack.kv.memory_mb << " }\n";
  };
  t << "\n[baseline]\n";
  stack(plan.variants.front());
  for (std::size_t i = 1; i < plan.variants.size(); ++i) {
    t << "\n[[variant]]\nname = " << json_quote(plan.variants[i].name) << "\n";
    if (const auto& m = plan.variants[i].model) {  // a substituted model
      t << "model = { " << (m->preset.empty() ? "path = " + json_quote(m->path) + ", format = " + json_quote(m->format)
                                              : "preset = " + json_quote(m->preset));
      if (!m->tokenizer.empty()) t << ", tokenizer = " << json_quote(m->tokenizer);
      if (m->n_layers) t << ", n_layers = " << m->n_layers;
      if (m->add_bos) t << ", add_bos = " << (*m->add_bos ? "true" : "false");
      if (!m->preset.empty()) t << ", seed = " << m->seed;
      t << " }\n";
    }
    stack(plan.variants[i]);
  }
  return t.str();
}

}  // namespace inferlab
