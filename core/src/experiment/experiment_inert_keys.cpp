// Every key acts or is refused (see experiment_inert_keys.h). config.toml (experiment_toml.cpp)
// writes none of the keys refused here, so a resolved config always reloads.
#include "experiment/experiment_inert_keys.h"

#include "inferlab/sim/sim_cost_model.h"
#include "inferlab/workload/workload.h"

namespace inferlab {

using namespace experiment_parse;

namespace {

const toml::table* sub_table(const toml::table* t, const char* key) {
  const toml::node* n = t ? t->get(key) : nullptr;
  return n ? n->as_table() : nullptr;
}

// Refuses `key` of `t` ([section]) when present: "[section] key does nothing <why>".
void refuse(const Ctx& c, const toml::table* t, const std::string& section, const char* key, const std::string& why) {
  if (const toml::node* v = t ? t->get(key) : nullptr) throw Error(c.at(*v) + ": " + section + " " + key + " does nothing " + why);
}

void refuse_device_keys(const Ctx& c, const toml::table* dev, const ExperimentSpec& spec) {
  const DeviceSpec& d = spec.device;
  const std::string on = "on kind = \"" + std::string(device_kind_name(d.kind)) + "\": ";
  if (d.kind != DeviceKind::kSim) {
    refuse(c, dev, "[device]", "tp", on + "tensor parallelism is simulated; use [device] kind = \"sim\"");
    refuse(c, dev, "[device]", "pp", on + "pipeline parallelism is simulated; use [device] kind = \"sim\"");
    refuse(c, dev, "[device]", "profile", on + "a hardware profile is what a simulated device models; use [device] kind = \"sim\"");
  }
  if (d.threads == 0) return;  // the default: all cores where there are cores to use
  if (d.kind == DeviceKind::kSim && !is_calibrated_profile(d.profile))
    refuse(c, dev, "[device]", "threads",
           on + "a simulated device has no CPU threads (the hardware profile sets its speed); allowed there: threads = 0, "
                "or a calibrated profile's own thread count");
  if (d.kind == DeviceKind::kSim) {  // a calibrated cost model predicts the thread count it was fit at
    const int fit = read_cost_model(d.profile.substr(kCalibratedProfile.size())).threads;
    if (d.threads != fit)
      throw Error(c.at(*dev->get("threads")) + ": [device] threads = " + std::to_string(d.threads) + " on kind = \"sim\": the calibrated cost model (" +
                  d.profile.substr(kCalibratedProfile.size()) + ") was fit at " + std::to_string(fit) +
                  " thread(s) and predicts only those; allowed: threads = " + std::to_string(fit) + " or 0");
  }
  if (d.kind == DeviceKind::kCuda && !spec.quality.enabled && !spec.calibration.enabled)
    refuse(c, dev, "[device]", "threads",
           on + "the GPU runs the model; host threads run only [quality]'s reference and [calibration]; allowed: "
                "threads = 0, or add one of those sections");
}

// A model table's seed, tokenizer and add_bos where nothing reads them.
void refuse_model_keys(const Ctx& c, const toml::table* t, const std::string& section, const ModelSpec& m,
                       const ExperimentSpec& spec) {
  if (!m.path.empty())
    refuse(c, t, section, "seed", "for a checkpoint 'path' (its weights come from the file); it seeds a preset's random weights");
  if (spec.device.kind == DeviceKind::kSim) {
    refuse(c, t, section, "seed", "on kind = \"sim\": a simulated run makes no weights; use [device] kind = \"cpu\" or \"cuda\"");
    refuse(c, t, section, "tokenizer",
           "on kind = \"sim\": a simulated run reads only the model's shape, no weights or tokenizer; use [device] kind = "
           "\"cpu\" or \"cuda\"");
  }
  if (!spec.quality.enabled)
    refuse(c, t, section, "add_bos", "without [quality]: it decides whether [quality]'s text starts with BOS; add [quality]");
}

// A prompt_len / output_len table's keys its distribution does not read.
void refuse_length_keys(const Ctx& c, const toml::table* t, const std::string& name, const LengthSpec& l) {
  if (!t) return;
  const std::string why = "with dist = \"" + l.dist + "\" (";
  const char* reads = l.dist == "fixed" ? "fixed reads value" : l.dist == "uniform" ? "uniform reads min and max"
                      : l.dist == "lognormal"                  ? "lognormal reads mean, sigma, min and max"
                                                               : "trace reads lengths_file; clip with max_prompt/max_output";
  for (const char* key : {"value", "min", "max", "mean", "sigma"}) {
    const std::string k = key;
    const bool used = (l.dist == "fixed" && k == "value") || (l.dist == "uniform" && (k == "min" || k == "max")) ||
                      (l.dist == "lognormal" && k != "value");
    if (!used) refuse(c, t, "[workload] " + name, key, why + reads + ")");
  }
}

void refuse_workload_keys(const Ctx& c, const toml::table* t, const WorkloadSpec& w) {
  if (!t) return;
  if (!w.trace.empty()) {
    for (const char* key : {"num_requests", "arrival", "rate", "burstiness", "prompt_len", "output_len", "lengths_file",
                            "shared_prefix"})
      refuse(c, t, "[workload]", key, "beside a trace (its rows give the arrivals and lengths); it shapes synthetic requests");
    if (t->get("trace_model") || t->get("trace_log_type")) {  // the first line says what "auto" is
      const std::string format = w.format == "auto" ? detect_trace_format(w.trace) : w.format;
      const std::string why = "with a " + format + " trace" + (w.format == "auto" ? " (detected)" : "") +
                              "; it filters BurstGPT rows (format = \"burstgpt\")";
      if (format != "burstgpt") {
        refuse(c, t, "[workload]", "trace_model", why);
        refuse(c, t, "[workload]", "trace_log_type", why);
      }
    }
    return;
  }
  for (const char* key : {"format", "trace_model", "trace_log_type", "prefix_block_tokens"})
    refuse(c, t, "[workload]", key, "without a trace; it reads a trace file: set [workload] trace");
  if (w.arrival == "all_at_once") {
    refuse(c, t, "[workload]", "rate", "with arrival = \"all_at_once\"; it paces arrival = \"poisson\" or \"gamma\"");
    refuse(c, t, "[workload]", "time_scale", "with arrival = \"all_at_once\" (every request arrives at 0); it scales "
                                             "a trace's or poisson/gamma arrivals");
  }
  if (w.arrival != "gamma")
    refuse(c, t, "[workload]", "burstiness", "with arrival = \"" + w.arrival + "\"; it shapes arrival = \"gamma\"");
  if (w.prompt_len.dist != "trace" && w.output_len.dist != "trace")
    refuse(c, t, "[workload]", "lengths_file", "unless prompt_len or output_len has dist = \"trace\"");
  refuse_length_keys(c, sub_table(t, "prompt_len"), "prompt_len", w.prompt_len);
  refuse_length_keys(c, sub_table(t, "output_len"), "output_len", w.output_len);
}

}  // namespace

void refuse_inert_keys(const Ctx& c, const toml::table& root, const ExperimentSpec& spec) {
  if (const toml::table* e = sub_table(&root, "experiment"); e && !spec.isolate) {
    if (spec.cell_timeout_s > 0)
      refuse(c, e, "[experiment]", "cell_timeout_s", "with isolate = false (it limits an isolated cell); allowed: isolate = true");
    if (spec.cell_memory_mb > 0)
      refuse(c, e, "[experiment]", "cell_memory_mb", "with isolate = false (it limits an isolated cell); allowed: isolate = true");
  }
  refuse_device_keys(c, sub_table(&root, "device"), spec);
  refuse_model_keys(c, sub_table(&root, "model"), "[model]", spec.model, spec);
  if (const toml::node* vs = root.get("variant"); vs && vs->as_array())
    for (std::size_t i = 0; i < vs->as_array()->size(); ++i)
      if (const Variant& v = spec.variants[i + 1]; v.model)
        refuse_model_keys(c, sub_table(vs->as_array()->get(i)->as_table(), "model"), "[[variant]] model", *v.model, spec);
  refuse_workload_keys(c, sub_table(&root, "workload"), spec.workload);
  for (const Variant& v : spec.variants)
    if (v.stack.kv.gpu_memory_fraction > 0 && spec.device.kind != DeviceKind::kCuda)
      throw Error(v.stack.kv_where + ": variant '" + v.name + "': kv.gpu_memory_fraction does nothing on kind = \"" +
                  device_kind_name(spec.device.kind) + "\": it sizes the KV pool from GPU memory; use [device] kind = \"cuda\", or "
                  "kv.num_blocks / kv.memory_mb here");
}

}  // namespace inferlab
