// manifest.json: the provenance of one run (see manifest.h).
#include "inferlab/results/manifest.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>

#include "formats/json.h"
#include "inferlab/error.h"
#include "inferlab/formats/formats.h"
#include "inferlab/results/report.h"
#include "inferlab/support/rng.h"
#include "inferlab/support/sha256.h"
#include "inferlab/tokenizer/tokenizer.h"
#include "inferlab/experiment/quantization_rules.h"
#include "kernels/cpu/linear_plan.h"

namespace inferlab {

namespace {

// The first output of a shell command, trailing newlines removed ("" when it fails).
std::string shell_line(const std::string& cmd) {
  std::string out;
  if (FILE* p = popen(cmd.c_str(), "r")) {
    char buf[256];
    while (fgets(buf, sizeof buf, p)) out += buf;
    pclose(p);
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

// What text was encoded with: BOS/EOS/dummy-prefix as applied, and where the BOS choice came from.
std::string tokenization_json(const Tokenizer* tok, std::optional<bool> add_bos) {
  if (!tok) return "null";
  const TokenizerConventions& c = tok->conventions();
  const bool bos = add_bos.value_or(c.add_bos);
  std::ostringstream o;
  o << "{\"add_bos\": " << (bos ? "true" : "false") << ", \"add_bos_source\": "
    << (add_bos ? "\"experiment ([model] add_bos)\"" : "\"model file\"") << ", \"add_eos\": " << (c.add_eos ? "true" : "false")
    << ", \"add_space_prefix\": " << (c.add_space_prefix ? "true" : "false") << ", \"bos_id\": " << tok->bos_id()
    << ", \"eos_id\": " << tok->eos_id() << "}";
  return o.str();
}

}  // namespace

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown";
}

std::string manifest_json(const Plan& plan, const Registry& registry, const ModelConfig& model,
                          std::size_t requests, int threads, const Tokenizer* tokenizer) {
  const ExperimentSpec& spec = plan.spec;
  std::ostringstream m;
  const std::string src = INFERLAB_SOURCE_DIR;
  std::string commit = shell_line("git -C '" + src + "' rev-parse HEAD 2>/dev/null");
  std::string dirty = shell_line("git -C '" + src + "' status --porcelain --untracked-files=no 2>/dev/null");
  m << "{\n  \"experiment\": " << json_quote(spec.name) << ",\n  \"config_file\": " << json_quote(spec.source_path)
    << ",\n  \"config_hash\": " << json_quote(text_hash(spec.source_text)) << ",\n  \"overrides\": [";
  for (std::size_t i = 0; i < spec.overrides.size(); ++i) m << (i ? ", " : "") << json_quote(spec.overrides[i]);
  m << "],\n  \"git_commit\": " << json_quote(commit.empty() ? "unknown" : commit)
    << ",\n  \"git_dirty\": " << (dirty.empty() ? "false" : "true") << ",\n  \"compiler\": " << json_quote(INFERLAB_CXX_COMPILER)
    << ",\n  \"cpu\": " << json_quote(cpu_model()) << ",\n  \"cpu_isa\": " << json_quote(cpu::cpu_isa_text(cpu::CpuIsa::host()))
    << ",\n  \"hardware_threads\": " << std::thread::hardware_concurrency()
    << ",\n  \"threads\": " << threads << ",\n  \"device\": " << json_quote(device_kind_name(spec.device.kind))
    << ",\n  \"model\": {\"name\": " << json_quote(model.name) << ", \"preset\": " << json_quote(spec.model.preset)
    << ", \"path\": " << json_quote(spec.model.path)
    << ", \"hash\": " << json_quote(spec.model.path.empty() ? "" : file_hash(spec.model.path))
    << ", \"parameters\": " << model.parameter_count() << ", \"weights_seed\": " << spec.model.seed
    << ", \"reference_note\": " << json_quote(quantized_source_note(model.source_linear_types)) << "},\n"
    << "  \"tokenization\": " << tokenization_json(tokenizer, spec.model.add_bos) << ",\n"
    << "  \"workload\": {\"trace\": " << json_quote(spec.workload.trace)
    << ", \"trace_hash\": " << json_quote(spec.workload.trace.empty() ? "" : file_hash(spec.workload.trace))
    << ", \"requests\": " << requests << ", \"seed\": " << spec.workload.seed << "},\n"
    << "  \"seed\": " << spec.seed << ",\n  \"repeats\": " << plan.repeats << ",\n  \"plugins\": [";
  bool first = true;
  for (const auto* d : registry.list()) {
    m << (first ? "\n" : ",\n") << "    {\"kind\": \"" << plugin_kind_name(d->kind) << "\", \"name\": " << json_quote(d->name)
      << ", \"version\": " << json_quote(d->version) << ", \"library\": " << json_quote(registry.library_path(*d))
      << ", \"sha256\": " << json_quote(file_sha256(registry.library_path(*d))) << "}";
    first = false;
  }
  m << "\n  ],\n  \"stacks\": [";
  for (std::size_t i = 0; i < plan.variants.size(); ++i) {
    const auto& v = plan.variants[i];
    m << (i ? ",\n" : "\n") << "    {\"variant\": " << json_quote(v.name);
    for (PluginKind k : kStackKinds) {
      const auto& d = registry.find(k, v.stack.choice(k).name);
      m << ", \"" << plugin_kind_name(k) << "\": " << json_quote(d.name + " " + d.version);
    }
    if (v.model) m << ", \"model\": " << json_quote(v.model->preset.empty() ? v.model->path : "preset " + v.model->preset);
    if (!v.stack.quantization_rules.empty()) m << ",\n     \"quantization_rules\": " << quantization_rules_json(v);
    m << "}";
  }
  m << "\n  ],\n  \"repeat_seeds\": [";
  for (int rep = 0; rep < plan.repeats; ++rep)
    m << (rep ? ", " : "") << mix_seed(spec.seed, static_cast<std::uint64_t>(rep));
  m << "]\n}\n";
  return m.str();
}

namespace {
const char* kRunKey = ",\n  \"run\": ";

std::string cells_json(const std::vector<CellRef>& cells) {
  std::string out = "[";
  for (std::size_t i = 0; i < cells.size(); ++i)
    out += (i ? ", " : "") + std::string("{\"variant\": ") + json_quote(cells[i].variant) +
           ", \"repeat\": " + std::to_string(cells[i].repeat) + "}";
  return out + "]";
}
}  // namespace

std::string manifest_with_state(const std::string& manifest, const RunState& state) {
  std::string base = manifest;
  const auto at = base.find(kRunKey);
  if (at != std::string::npos) base.resize(at);
  else base.resize(base.rfind('}'));
  while (!base.empty() && (base.back() == '\n' || base.back() == ' ')) base.pop_back();
  std::ostringstream m;
  m << base << kRunKey << "{\"status\": " << json_quote(state.status);
  if (!state.signal.empty()) m << ", \"signal\": " << json_quote(state.signal);
  if (!state.reason.empty()) m << ", \"reason\": " << json_quote(state.reason);
  if (state.pid > 0) m << ", \"pid\": " << state.pid << ", \"host\": " << json_quote(state.host);
  m << ", \"cells_total\": " << state.done.size() + state.missing.size() << ", \"cells_done\": " << state.done.size()
    << ", \"resumes\": " << state.resumes << ",\n    \"done\": " << cells_json(state.done)
    << ",\n    \"missing\": " << cells_json(state.missing);
  if (state.shard.count > 1)
    m << ",\n    \"shard\": {\"index\": " << state.shard.index << ", \"count\": " << state.shard.count << "}";
  if (!state.merged_from.empty()) m << ",\n    \"merged_from\": " << state.merged_from;
  if (!state.config_hash.empty()) m << ",\n    \"config_toml_hash\": " << json_quote(state.config_hash);
  if (!state.config_forced.empty()) {
    m << ",\n    \"config_forced\": [";
    for (std::size_t i = 0; i < state.config_forced.size(); ++i) {
      const ConfigChange& c = state.config_forced[i];
      m << (i ? ", " : "") << "{\"resume\": " << c.resume << ", \"from\": " << json_quote(c.from)
        << ", \"to\": " << json_quote(c.to) << ", \"changed\": [";
      for (std::size_t k = 0; k < c.keys.size(); ++k) m << (k ? ", " : "") << json_quote(c.keys[k]);
      m << "]}";
    }
    m << "]";
  }
  if (!state.determinism.empty()) {
    m << ",\n    \"determinism\": {";
    for (std::size_t i = 0; i < state.determinism.size(); ++i)
      m << (i ? ", " : "") << json_quote(state.determinism[i].first) << ": " << json_quote(state.determinism[i].second);
    m << "}";
  }
  m << "}\n}\n";
  return m.str();
}

namespace {

// The manifest read back (null when it is not valid JSON: it then records nothing to compare with).
formats::json::value read_manifest(const std::string& manifest) {
  try {
    return formats::parse_json(manifest, "manifest.json");
  } catch (const Error&) {
    return nullptr;
  }
}

}  // namespace

int manifest_resumes(const std::string& manifest) {
  return static_cast<int>(formats::json_int_at(read_manifest(manifest), "run.resumes", 0));
}

Shard manifest_shard(const std::string& manifest) {
  const formats::json::value m = read_manifest(manifest);
  if (!formats::json_find_path(m, "run.shard")) return {};
  return Shard{static_cast<int>(formats::json_int_at(m, "run.shard.index", 0)),
               static_cast<int>(formats::json_int_at(m, "run.shard.count", 1))};
}

void manifest_config_record(const std::string& manifest, RunState& state) {
  const formats::json::value m = read_manifest(manifest);
  if (m.is_null()) return;
  state.config_hash = formats::json_text_at(m, "run.config_toml_hash", "");
  state.config_forced.clear();
  const formats::json::value* forced = formats::json_find_path(m, "run.config_forced");
  if (!forced || !forced->is_array()) return;
  for (const formats::json::value& v : forced->get_array()) {
    ConfigChange c;
    c.resume = static_cast<int>(formats::json_int_at(v, "resume", 0));
    c.from = formats::json_text_at(v, "from", "");
    c.to = formats::json_text_at(v, "to", "");
    if (const formats::json::value* keys = formats::json_find(v, "changed"); keys && keys->is_array())
      for (const formats::json::value& key : keys->get_array())
        c.keys.push_back(formats::json_text_at(key, "", ""));
    state.config_forced.push_back(std::move(c));
  }
}

}  // namespace inferlab
