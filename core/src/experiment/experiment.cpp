#include "inferlab/experiment/experiment.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>

#include "inferlab/experiment/tomlpp.h"

#include "experiment/experiment_inert_keys.h"
#include "experiment/experiment_model.h"
#include "experiment/experiment_override.h"
#include "experiment/experiment_parse.h"
#include "experiment/experiment_stack.h"
#include "experiment/experiment_workload.h"
#include "inferlab/error.h"
#include "inferlab/experiment/experiment_keys.h"
#include "inferlab/experiment/input_checks.h"
#include "inferlab/experiment/toml_input.h"
#include "inferlab/model/model_config.h"
#include "inferlab/sim/sim.h"

namespace inferlab {
namespace fs = std::filesystem;

PluginChoice& Stack::choice(PluginKind kind) {
  switch (kind) {
    case PluginKind::kAttention: return attention;
    case PluginKind::kQuantization: return quantization;
    case PluginKind::kScheduling: return scheduler;
    case PluginKind::kDecoding: return decoding;
  }
  return attention;
}
const PluginChoice& Stack::choice(PluginKind kind) const { return const_cast<Stack*>(this)->choice(kind); }

const char* stack_key(PluginKind kind) {
  switch (kind) {
    case PluginKind::kAttention: return "attention";
    case PluginKind::kQuantization: return "quantization";
    case PluginKind::kScheduling: return "scheduler";
    case PluginKind::kDecoding: return "decoding";
  }
  return "?";
}

bool stack_key_kind(const std::string& key, PluginKind& kind) {
  for (PluginKind k : kStackKinds)
    if (key == stack_key(k)) {
      kind = k;
      return true;
    }
  return false;
}

std::string data_root() {
  if (const char* env = std::getenv("INFERLAB_DATA"); env && *env) return env;
  return (fs::path(INFERLAB_SOURCE_DIR).parent_path() / "shared").string();
}

std::string resolve_data_path(const std::string& path, const std::string& base_dir, const std::string& where) {
  if (path.empty()) throw Error(where + ": empty path");
  // fs::exists without an error code throws a bare filesystem_error on a symbolic link loop.
  auto present = [&](const fs::path& t) {
    std::error_code ec;
    if (fs::exists(t, ec)) return true;
    if (ec.value() == ELOOP)
      throw Error(where + ": " + quote_input(t.string()) + ": a symbolic link loop; allowed: a path to an existing file");
    return false;
  };
  fs::path p(path);
  if (p.is_absolute()) {
    if (present(p)) return p.string();
    throw Error(where + ": file not found: " + quote_input(path));
  }
  std::vector<fs::path> tries;
  if (!base_dir.empty()) tries.push_back(fs::path(base_dir) / p);
  for (const fs::path& dir : {fs::current_path(), fs::path(INFERLAB_SOURCE_DIR), fs::path(data_root())})
    tries.push_back(dir / p);
  for (const auto& t : tries)
    if (present(t)) return fs::weakly_canonical(t).string();
  std::string looked;
  for (const auto& t : tries) looked += (looked.empty() ? "" : ", ") + t.lexically_normal().string();
  throw Error(where + ": file not found: " + quote_input(path) + " (looked in " + looked + "; set INFERLAB_DATA for shared data)");
}

namespace experiment_parse {

namespace {

constexpr std::size_t kMaxNameLength = 128;
constexpr const char* kNameAllowed = "1 to 128 letters, digits and - _ . + = (not . or ..)";

bool name_char(char ch) {
  return std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '_' || ch == '.' || ch == '+' || ch == '=';
}

// A byte of a name as a message shows it: itself when printable ASCII, else \xNN.
std::string shown_byte(char ch) {
  const auto b = static_cast<unsigned char>(ch);
  if (b > 0x20 && b < 0x7f) return std::string(1, ch);
  char hex[8];
  std::snprintf(hex, sizeof hex, "\\x%02x", b);
  return hex;
}

}  // namespace

bool is_safe_name(const std::string& name) {
  return !name.empty() && name.size() <= kMaxNameLength && name != "." && name != ".." &&
         std::all_of(name.begin(), name.end(), name_char);
}

void check_name(const std::string& where, const std::string& what, const std::string& name) {
  if (is_safe_name(name)) return;
  std::string shown;  // at most 40 characters
  for (std::size_t i = 0; i < name.size() && i < 40; ++i) shown += name[i] == ' ' ? " " : shown_byte(name[i]);
  if (name.size() > 40) shown += "...";
  std::string problem;
  if (name.empty()) problem = "is empty";
  else if (name == "." || name == "..") problem = "is a path, not a name";
  else if (name.size() > kMaxNameLength) problem = "has " + std::to_string(name.size()) + " characters";
  else {
    const auto bad = std::find_if_not(name.begin(), name.end(), name_char);
    problem = "has " + (*bad == ' ' ? std::string("a space") : "'" + shown_byte(*bad) + "'") + " at position " +
              std::to_string(bad - name.begin() + 1);
  }
  throw Error(where + ": " + what + " '" + shown + "' " + problem + "; allowed: " + kNameAllowed);
}

}  // namespace experiment_parse

namespace {

ExperimentSpec load(const std::string& path, const std::vector<std::string>& overrides, bool refuse_inert);

}  // namespace

ExperimentSpec load_experiment(const std::string& path, const std::vector<std::string>& overrides) {
  return load(path, overrides, true);
}

ExperimentSpec load_resolved_config(const std::string& path) { return load(path, {}, false); }

namespace {

using namespace experiment_parse;  // Ctx, check_keys, get_* (experiment_parse.h)

// The TOML tree with the --set overrides applied; a syntax error at its file:line:col.
toml::table parse_experiment_toml(const std::string& text, const std::string& path,
                                  const std::vector<std::string>& overrides) {
  toml::table root = parse_toml_text(text, path);
  for (const auto& o : overrides) apply_override(root, o);
  return root;
}

// [experiment]: name (default: the file's stem), description, seed (every section's default
// seed), repeats and the cells' isolation and limits.
void parse_experiment_table(const Ctx& c, const toml::table& root, const std::string& path, ExperimentSpec& spec) {
  if (auto n = root.get("experiment")) {
    const auto& t = get_table(c, *n, "experiment");
    check_keys(c, t, "[experiment]", experiment_keys("experiment"));
    if (auto v = t.get("name")) {
      spec.name = get_string(c, *v, "name");
      check_name(c.at(*v), "[experiment] name", spec.name);
    }
    if (auto v = t.get("description")) spec.description = get_string(c, *v, "description");
    if (auto v = t.get("seed")) spec.seed = static_cast<std::uint64_t>(get_int(c, *v, "seed", 0, INT64_MAX));
    if (auto v = t.get("repeats")) spec.repeats = static_cast<int>(get_int(c, *v, "repeats", 1, kMaxRepeats));
    if (auto v = t.get("isolate")) {
      check(v->is_boolean(), c.at(*v) + ": 'isolate' must be true or false, got " + type_name(*v));
      spec.isolate = v->as_boolean()->get();
    }
    if (auto v = t.get("cell_timeout_s")) spec.cell_timeout_s = get_float(c, *v, "cell_timeout_s", 0.0, kMaxSeconds);
    if (auto v = t.get("cell_memory_mb")) spec.cell_memory_mb = get_int(c, *v, "cell_memory_mb", 0, INT64_MAX / (1 << 20));
  }
  if (spec.name.empty()) {
    spec.name = fs::path(path).stem().string();
    check_name(path, "the experiment name (the file's stem, as no [experiment] name is set)", spec.name);
  }
  spec.model.seed = spec.seed;
  spec.workload.seed = spec.seed;
}

// [device]: kind, threads, fuse (cpu and cuda), cuda_graphs (cuda only), profile (a hardware profile or a calibrated cost
// model, read here), tp and pp (not with a calibrated profile).
void parse_device(const Ctx& c, const toml::node& n, const std::string& base_dir, DeviceSpec& device) {
  const auto& t = get_table(c, n, "device");
  check_keys(c, t, "[device]", experiment_keys("device"));
  if (auto v = t.get("kind")) {
    const std::string kind = get_string(c, *v, "kind");
    if (!parse_device_kind(kind, device.kind))
      throw Error(c.at(*v) + ": [device] kind = \"" + quote_input(kind) + "\"; allowed: cpu, cuda, sim");
  }
  if (auto v = t.get("threads")) device.threads = static_cast<int>(get_int(c, *v, "threads", 0, 4096));
  if (auto v = t.get("fuse")) {
    check(v->is_boolean(), c.at(*v) + ": 'fuse' must be true or false, got " + type_name(*v));
    device.fuse = v->as_boolean()->get();
    // A simulated device has no ops to fuse (its cost model prices the unfused step).
    check(!device.fuse || device.kind != DeviceKind::kSim,
          c.at(*v) + ": [device] fuse = true runs on cpu and cuda (the fused ops are their kernels); kind is \"" +
              device_kind_name(device.kind) + "\", allowed there: fuse = false");
  } else {
    device.fuse = fused_by_default(device.kind);
  }
  if (auto v = t.get("cuda_graphs")) {
    check(v->is_boolean(), c.at(*v) + ": 'cuda_graphs' must be true or false, got " + type_name(*v));
    device.cuda_graphs = v->as_boolean()->get();
    // Graphs are captured on a CUDA stream; the CPU runs ops as they are issued, sim runs none.
    check(!device.cuda_graphs || device.kind == DeviceKind::kCuda,
          c.at(*v) + ": [device] cuda_graphs = true is cuda-only (decode steps are captured as CUDA graphs); kind is \"" +
              device_kind_name(device.kind) + "\", allowed there: cuda_graphs = false");
  }
  if (auto v = t.get("profile")) {
    const std::string profile = get_string(c, *v, "profile");
    try {
      if (is_calibrated_profile(profile)) {  // a fitted cost model: "calibrated:PATH"
        const std::string path = resolve_data_path(profile.substr(kCalibratedProfile.size()), base_dir, c.at(*v));
        read_cost_model(path);  // malformed files are refused here, with their own file:line
        device.profile = std::string(kCalibratedProfile) + path;
      } else {
        device.profile = hw_profile(profile).name;
      }
    } catch (const Error& e) {
      throw Error(c.at(*v) + ": " + e.what());
    }
  }
  if (auto v = t.get("tp")) device.tp = static_cast<int>(get_int(c, *v, "tp", 1, 1024));
  if (auto v = t.get("pp")) device.pp = static_cast<int>(get_int(c, *v, "pp", 1, 1024));
  if (is_calibrated_profile(device.profile) && (device.tp > 1 || device.pp > 1))
    throw Error(c.file + ": [device] a calibrated profile was measured on one CPU executor, so tp and pp must be 1; "
                         "a hardware profile (a100-40gb, a100-80gb, h100, h200) models parallelism");
}

// [slo]: per-class and overall latency targets.
void parse_slo(const Ctx& c, const toml::node& n, SloSpec& slo) {
  const auto& t = get_table(c, n, "slo");
  check_keys(c, t, "[slo]", experiment_keys("slo"));
  if (auto v = t.get("class_ttft_ms")) slo.class_ttft_ms = get_float_list(c, *v, "class_ttft_ms");
  if (auto v = t.get("class_tpot_ms")) slo.class_tpot_ms = get_float_list(c, *v, "class_tpot_ms");
  if (auto v = t.get("class_e2e_ms")) slo.class_e2e_ms = get_float_list(c, *v, "class_e2e_ms");
  if (auto v = t.get("ttft_ms")) slo.ttft_ms = get_float(c, *v, "ttft_ms", 0);
  if (auto v = t.get("tpot_ms")) slo.tpot_ms = get_float(c, *v, "tpot_ms", 0);
  if (auto v = t.get("e2e_ms")) slo.e2e_ms = get_float(c, *v, "e2e_ms", 0);
}

// [quality]: a non-empty UTF-8 text, max_tokens, context (0 or >= 2).
void parse_quality(const Ctx& c, const toml::node& n, const std::string& base_dir, QualitySpec& quality) {
  const auto& t = get_table(c, n, "quality");
  check_keys(c, t, "[quality]", experiment_keys("quality"));
  quality.enabled = true;
  auto v = t.get("text");
  if (!v) throw Error(c.at(n) + ": [quality] needs 'text' (a UTF-8 text file)");
  quality.text = resolve_data_path(get_string(c, *v, "text"), base_dir, c.at(*v));
  // An empty text (or a folder, /dev/null) gives fewer than the 2 tokens perplexity needs.
  std::error_code ec;
  try {
    check_text_file(quality.text, "[quality] text");
  } catch (const Error& e) {
    throw Error(c.at(*v) + ": " + e.what());
  }
  if (fs::file_size(quality.text, ec) == 0)
    throw Error(c.at(*v) + ": [quality] text " + quality.text +
                " is empty or not a regular file; allowed: a UTF-8 text file with at least one character");
  if (auto m = t.get("max_tokens")) quality.max_tokens = static_cast<int>(get_int(c, *m, "max_tokens", 2, 1 << 24));
  if (auto m = t.get("context")) {
    quality.context = static_cast<int>(get_int(c, *m, "context", 0, 1 << 24));
    if (quality.context == 1)  // a 1-token window predicts nothing
      throw Error(c.at(*m) + ": 'context' = 1 is out of range; allowed: 0 (the model's context) or >= 2");
  }
}

// [calibration]: tokens, seq_len, seed and a UTF-8 text long enough for `tokens`.
void parse_calibration(const Ctx& c, const toml::node& n, const std::string& base_dir, CalibrationSpec& calibration) {
  const auto& t = get_table(c, n, "calibration");
  check_keys(c, t, "[calibration]", experiment_keys("calibration"));
  calibration.enabled = true;
  if (auto m = t.get("tokens")) calibration.tokens = static_cast<int>(get_int(c, *m, "tokens", 2, 1 << 20));
  if (auto m = t.get("seq_len")) calibration.seq_len = static_cast<int>(get_int(c, *m, "seq_len", 2, 1 << 16));
  if (auto m = t.get("seed")) calibration.seed = static_cast<std::uint64_t>(get_int(c, *m, "seed", 0, INT64_MAX));
  auto v = t.get("text");
  if (!v) throw Error(c.at(n) + ": [calibration] needs 'text' (a UTF-8 text file of at least 'tokens' tokens)");
  calibration.text = resolve_data_path(get_string(c, *v, "text"), base_dir, c.at(*v));
  std::error_code ec;
  try {
    check_text_file(calibration.text, "[calibration] text");
  } catch (const Error& e) {
    throw Error(c.at(*v) + ": " + e.what());
  }
  if (fs::file_size(calibration.text, ec) == 0)
    throw Error(c.at(*v) + ": [calibration] text " + calibration.text +
                " is empty or not a regular file; allowed: a UTF-8 text file of at least 'tokens' tokens");
  // A token covers at least one byte (one more for the BOS), so a shorter file cannot hold
  // `tokens` tokens whatever the tokenizer; the exact count is checked once it is tokenized.
  const auto bytes = fs::file_size(calibration.text, ec);
  if (bytes + 1 < static_cast<std::uintmax_t>(calibration.tokens))
    throw Error(c.at(*v) + ": [calibration] text " + calibration.text + " has " + std::to_string(bytes) +
                " bytes, too short for tokens = " + std::to_string(calibration.tokens) +
                "; allowed: a longer text or fewer tokens");
}

// [plugins] paths: folders searched for plugin libraries, resolved.
void parse_plugins(const Ctx& c, const toml::node& n, const std::string& base_dir, std::vector<std::string>& paths) {
  const auto& t = get_table(c, n, "plugins");
  check_keys(c, t, "[plugins]", experiment_keys("plugins"));
  if (auto v = t.get("paths")) {
    auto arr = v->as_array();
    if (!arr) throw Error(c.at(*v) + ": plugins.paths must be an array of folders");
    for (const auto& p : *arr) paths.push_back(resolve_data_path(get_string(c, p, "paths"), base_dir, c.at(p)));
  }
}

// [baseline] (defaults where absent) and each [[variant]] (the baseline's stack with its own
// keys, or a substituted model) into spec.variants; returns the names taken.
std::set<std::string> parse_variants(const Ctx& c, const toml::table& root, const std::string& path,
                                     const std::string& base_dir, ExperimentSpec& spec) {
  Variant baseline{"baseline", {}};
  if (auto n = root.get("baseline")) {
    const auto& t = get_table(c, *n, "baseline");
    check_keys(c, t, "[baseline]", experiment_keys("stack"));
    for (auto&& [k, v] : t) apply_stack_key(c, baseline.stack, std::string(k.str()), v);
  }
  for (PluginKind k : kStackKinds)
    if (baseline.stack.choice(k).where.empty()) baseline.stack.choice(k).where = path + " (default)";
  spec.variants.push_back(baseline);
  std::set<std::string> names{"baseline"};
  const toml::node* n = root.get("variant");
  if (!n) return names;
  auto arr = n->as_array();
  if (!arr) throw Error(c.at(*n) + ": variants are written [[variant]] (an array of tables)");
  for (const auto& item : *arr) {
    const auto& t = get_table(c, item, "variant");
    check_keys(c, t, "[[variant]]", experiment_keys("variant"));
    Variant v{"", baseline.stack};
    auto nm = t.get("name");
    if (!nm) throw Error(c.at(item) + ": [[variant]] needs a 'name'");
    v.name = get_string(c, *nm, "name");
    check_name(c.at(*nm), "[[variant]] name", v.name);
    if (!names.insert(v.name).second) throw Error(c.at(*nm) + ": duplicate variant name '" + v.name + "'");
    for (auto&& [k, val] : t)
      if (k.str() == "model") {
        v.model = parse_model_table(c, val, "[[variant]] model", base_dir, spec.seed);
        v.model_where = c.at(val);
      }
      else if (k.str() != "name") apply_stack_key(c, v.stack, std::string(k.str()), val);
    spec.variants.push_back(std::move(v));
  }
  return names;
}

ExperimentSpec load(const std::string& path, const std::vector<std::string>& overrides, bool refuse_inert) {
  ExperimentSpec spec;
  spec.source_path = path;
  spec.overrides = overrides;
  spec.source_text = read_toml_text(path, "an experiment TOML file (a results folder is resumed with run --resume DIR)");
  const toml::table root = parse_experiment_toml(spec.source_text, path, overrides);
  const Ctx c{path, {}};
  const std::string base_dir = fs::path(path).parent_path().string();
  check_keys(c, root, "the experiment file", experiment_keys("file"));
  parse_experiment_table(c, root, path, spec);
  if (auto n = root.get("model")) {
    spec.model = parse_model_table(c, *n, "[model]", base_dir, spec.seed);
  } else {
    throw Error(path + ": missing [model] section (preset = \"stories15m\" or path = \"...\")");
  }
  if (auto n = root.get("device")) parse_device(c, *n, base_dir, spec.device);
  if (auto n = root.get("workload")) parse_workload(c, get_table(c, *n, "workload"), base_dir, spec.workload);
  if (auto n = root.get("slo")) parse_slo(c, *n, spec.slo);
  if (auto n = root.get("quality")) parse_quality(c, *n, base_dir, spec.quality);
  spec.calibration.seed = spec.seed;
  if (auto n = root.get("calibration")) parse_calibration(c, *n, base_dir, spec.calibration);
  if (auto n = root.get("plugins")) parse_plugins(c, *n, base_dir, spec.plugin_paths);
  std::set<std::string> names = parse_variants(c, root, path, base_dir, spec);
  if (auto n = root.get("sweep")) {
    const Stack base = spec.variants.front().stack;
    add_sweep_variants(c, *n, base, names, spec.variants);
  }
  if (refuse_inert) refuse_inert_keys(c, root, spec);
  return spec;
}

}  // namespace

}  // namespace inferlab
