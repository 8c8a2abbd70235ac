#include "inferlab/experiment.h"

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

#include <toml++/toml.h>

#include "experiment_inert_keys.h"
#include "experiment_model.h"
#include "experiment_override.h"
#include "experiment_parse.h"
#include "experiment_quant_rules.h"
#include "inferlab/error.h"
#include "inferlab/experiment_keys.h"
#include "inferlab/input_checks.h"
#include "inferlab/model_config.h"
#include "inferlab/sim.h"

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

namespace {

using namespace experiment_parse;  // Ctx, check_keys, get_* (experiment_parse.h)

// `attention = "flash"` or `attention = { name = "flash", tile = 32 }`. A table without a name
// keeps the base choice's plugin and merges parameters into it.
PluginChoice parse_choice(const Ctx& c, const toml::node& n, const std::string& key, const PluginChoice& base) {
  PluginChoice out = base;
  out.where = c.at(n);
  if (auto s = n.as_string()) {
    out.name = s->get();
    out.params.clear();
    return out;
  }
  const auto& t = get_table(c, n, key);
  if (auto name = t.get("name")) {
    std::string nm = get_string(c, *name, key + ".name");
    if (nm != out.name) out.params.clear();
    out.name = nm;
  }
  for (auto&& [k, v] : t)
    if (k.str() != "name" && !(key == "quantization" && k.str() == "rules")) {  // rules: apply_stack_key
      out.params[std::string(k.str())] = to_param(c, v, std::string(k.str()));
      // A parameter from --set in a table from the file: say so, the file's line alone misleads.
      if (c.at(v) == c.file + " (--set)" && c.at(n) != c.at(v)) out.where += " (--set " + key + "." + std::string(k.str()) + ")";
    }
  return out;
}

void parse_kv(const Ctx& c, const toml::node& n, KvCacheConfig& kv) {
  const auto& t = get_table(c, n, "kv");
  check_keys(c, t, "kv", experiment_keys("kv"));
  if (auto v = t.get("enabled")) {
    auto b = v->as_boolean();
    if (!b) throw Error(c.at(*v) + ": 'kv.enabled' must be true or false, got " + type_name(*v));
    kv.enabled = b->get();
  }
  if (auto v = t.get("block_size")) kv.block_size = static_cast<int>(get_int(c, *v, "kv.block_size", 1, 1 << 20));
  if (auto v = t.get("num_blocks")) {
    kv.num_blocks = static_cast<int>(get_int(c, *v, "kv.num_blocks", 0, 1 << 26));
    kv.gpu_memory_fraction = 0;  // a later table's num_blocks replaces an inherited fraction
  }
  if (auto v = t.get("gpu_memory_fraction")) {
    if (t.get("num_blocks"))
      throw Error(c.at(*v) + ": kv.gpu_memory_fraction and kv.num_blocks both size the KV pool; allowed: one of them");
    const auto f = v->value<double>();
    if (!f || !(*f > 0.0 && *f <= 1.0))
      throw Error(c.at(*v) + ": kv.gpu_memory_fraction must be a number in (0, 1] (the share of GPU memory the run may use)");
    kv.gpu_memory_fraction = *f;
    kv.num_blocks = 0;
  }
  if (auto v = t.get("reservation")) {
    std::string r = get_string(c, *v, "kv.reservation");
    if (!parse_kv_reservation(r, kv.reservation))
      throw Error(c.at(*v) + ": kv.reservation = \"" + quote_input(r) + "\"; allowed: " + kKvReservationNames);
  }
  if (auto v = t.get("prefix_caching")) {
    auto b = v->as_boolean();
    if (!b) throw Error(c.at(*v) + ": 'kv.prefix_caching' must be true or false, got " + type_name(*v));
    kv.prefix_caching = b->get();
  }
  // The storage format (kv_format.h); whether it fits the model is checked at planning.
  if (auto v = t.get("dtype")) {
    const std::string d = get_string(c, *v, "kv.dtype");
    if (!parse_kv_dtypes(d, kv.format))
      throw Error(c.at(*v) + ": kv.dtype = \"" + quote_input(d) + "\"; allowed: " + kKvDtypeNames);
  }
  if (auto v = t.get("group_size")) kv.format.group_size = static_cast<int>(get_int(c, *v, "kv.group_size", 0, 4096));
  if (auto v = t.get("f32_first_layers"))
    kv.format.f32_first_layers = static_cast<int>(get_int(c, *v, "kv.f32_first_layers", 0, 1 << 16));
  if (auto v = t.get("f32_last_layers"))
    kv.format.f32_last_layers = static_cast<int>(get_int(c, *v, "kv.f32_last_layers", 0, 1 << 16));
  for (const char* key : {"group_size", "f32_first_layers", "f32_last_layers"})
    if (auto v = t.get(key); v && kv.format.all_f32())
      throw Error(c.at(*v) + ": kv." + key + " shapes a quantized KV cache but kv.dtype is f32; allowed: only with " +
                  "kv.dtype int8, int4, int8-keys, int4-keys, int8-values or int4-values");
  if (auto v = t.get("memory_mb")) kv.memory_mb = static_cast<int>(get_int(c, *v, "kv.memory_mb", 0, 1 << 24));
  if (kv.memory_mb > 0 && kv.num_blocks > 0)
    throw Error(c.at(n) + ": kv.memory_mb = " + std::to_string(kv.memory_mb) + " and kv.num_blocks = " +
                std::to_string(kv.num_blocks) + " both size the pool; allowed: one of them");
  if (kv.memory_mb > 0 && kv.gpu_memory_fraction > 0)
    throw Error(c.at(n) + ": kv.memory_mb and kv.gpu_memory_fraction both size the pool; allowed: one of them");
  if (kv.prefix_caching && kv.contiguous())
    throw Error(c.at(n) + ": kv.reservation = \"" + kv_reservation_name(kv.reservation) +
                "\" gives each request its own contiguous region, which prefix caching cannot share; allowed: "
                "prefix_caching with reservation on_demand or full");
  if (kv.prefix_caching && !kv.enabled)
    throw Error(c.at(n) + ": kv.prefix_caching needs the KV cache; it cannot be combined with kv.enabled = false");
}

const std::vector<std::string>& kStackKeys = experiment_keys("stack");

void apply_stack_key(const Ctx& c, Stack& s, const std::string& key, const toml::node& v) {
  PluginKind k = PluginKind::kAttention;
  if (stack_key_kind(key, k)) {
    const std::string before = s.choice(k).name;
    s.choice(k) = parse_choice(c, v, key, s.choice(k));
    if (k == PluginKind::kQuantization) apply_quantization_rules(c, v, before, s);
  } else if (key == "kv") {
    parse_kv(c, v, s.kv);
    s.kv_where = c.at(v);
  }
}

// The keys a table with each dist must give: a table missing one is refused, not completed from
// LengthSpec's defaults (a silent 64 tokens).
struct LengthKeys {
  const char* dist;
  std::vector<std::string> required;
  const char* example;
};
const std::vector<LengthKeys> kLengthKeys = {
    {"fixed", {"value"}, "{ dist = \"fixed\", value = 64 }"},
    {"uniform", {"min", "max"}, "{ dist = \"uniform\", min = 16, max = 256 }"},
    {"lognormal", {"mean", "sigma"}, "{ dist = \"lognormal\", mean = 64, sigma = 0.8, min = 8, max = 256 } (min, max optional)"},
    {"trace", {}, "{ dist = \"trace\" } with [workload] lengths_file"},
};

void parse_length(const Ctx& c, const toml::node& n, const std::string& key, LengthSpec& l) {
  if (n.as_integer()) {
    l.dist = "fixed";
    l.value = static_cast<int>(get_int(c, n, key, 1, kMaxRequestTokens));
    return;
  }
  const auto& t = get_table(c, n, key);
  check_keys(c, t, key, experiment_keys("length"));
  const toml::node* dist = t.get("dist");
  if (!dist)
    throw Error(c.at(n) + ": " + key + " table needs 'dist'; allowed: fixed, uniform, lognormal, trace, e.g. " + key +
                " = { dist = \"fixed\", value = 64 } (or " + key + " = 64)");
  l.dist = get_string(c, *dist, key + ".dist");
  const LengthKeys* keys = nullptr;
  for (const auto& k : kLengthKeys)
    if (l.dist == k.dist) keys = &k;
  if (!keys)
    throw Error(c.at(*dist) + ": " + key + ".dist = \"" + quote_input(l.dist) + "\"; allowed: fixed, uniform, lognormal, trace");
  // Keys of another distribution are still read (a resolved config.toml writes them all).
  std::vector<std::string> missing;
  for (const auto& r : keys->required)
    if (!t.get(r)) missing.push_back("'" + r + "'");
  if (!missing.empty())
    throw Error(c.at(n) + ": " + key + " with dist = \"" + l.dist + "\" needs " + join(missing) + "; allowed: " +
                keys->example);
  if (auto v = t.get("value")) l.value = static_cast<int>(get_int(c, *v, key + ".value", 1, kMaxRequestTokens));
  if (auto v = t.get("min")) l.min = static_cast<int>(get_int(c, *v, key + ".min", 1, kMaxRequestTokens));
  if (auto v = t.get("max")) l.max = static_cast<int>(get_int(c, *v, key + ".max", 1, kMaxRequestTokens));
  if (auto v = t.get("mean")) l.mean = get_float(c, *v, key + ".mean", 1.0, static_cast<double>(kMaxRequestTokens));
  if (auto v = t.get("sigma")) l.sigma = get_float(c, *v, key + ".sigma", 0.0, kMaxLengthSigma);
  if (l.min > l.max) throw Error(c.at(n) + ": " + key + ".min > " + key + ".max");
}

// An array of numbers >= 0, e.g. class_mix = [0.2, 0.8].
std::vector<double> get_float_list(const Ctx& c, const toml::node& n, const std::string& key) {
  const auto* arr = n.as_array();
  if (!arr) throw Error(c.at(n) + ": " + key + " must be an array of numbers >= 0, e.g. [0.2, 0.8]");
  std::vector<double> out;
  for (const toml::node& e : *arr) out.push_back(get_float(c, e, key, 0.0));
  return out;
}

void parse_workload(const Ctx& c, const toml::table& t, const std::string& base_dir, WorkloadSpec& w) {
  check_keys(c, t, "[workload]", experiment_keys("workload"));
  if (auto v = t.get("trace_model")) w.trace_model = get_string(c, *v, "trace_model");
  if (auto v = t.get("trace_log_type")) w.trace_log_type = get_string(c, *v, "trace_log_type");
  if (auto v = t.get("trace")) w.trace = resolve_data_path(get_string(c, *v, "trace"), base_dir, c.at(*v));
  if (auto v = t.get("format")) {
    w.format = get_string(c, *v, "format");
    if (w.format != "auto" && w.format != "canonical" && w.format != "azure" && w.format != "mooncake" &&
        w.format != "vidur" && w.format != "burstgpt")
      throw Error(c.at(*v) + ": format = \"" + quote_input(w.format) + "\"; allowed: auto, canonical, azure, mooncake, vidur, burstgpt");
  }
  if (auto v = t.get("num_requests")) w.num_requests = static_cast<int>(get_int(c, *v, "num_requests", 1, 10000000));
  if (auto v = t.get("arrival")) {
    w.arrival = get_string(c, *v, "arrival");
    if (w.arrival != "all_at_once" && w.arrival != "poisson" && w.arrival != "gamma")
      throw Error(c.at(*v) + ": arrival = \"" + quote_input(w.arrival) + "\"; allowed: all_at_once, poisson, gamma");
  }
  if (auto v = t.get("rate")) w.rate = get_float(c, *v, "rate", kMinRate, kMaxRate);
  if (auto v = t.get("burstiness")) w.burstiness = get_float(c, *v, "burstiness", kMinBurstiness, kMaxBurstiness);
  if (auto v = t.get("prompt_len")) parse_length(c, *v, "prompt_len", w.prompt_len);
  if (auto v = t.get("output_len")) parse_length(c, *v, "output_len", w.output_len);
  if (auto v = t.get("lengths_file"))
    w.lengths_file = resolve_data_path(get_string(c, *v, "lengths_file"), base_dir, c.at(*v));
  if ((w.prompt_len.dist == "trace" || w.output_len.dist == "trace") && w.lengths_file.empty())
    throw Error(c.at(t) + ": a length with dist = \"trace\" needs [workload] lengths_file (e.g. "
                "\"traces/sharegpt_8k_filtered_stats_llama2_tokenizer.csv\")");
  if (auto v = t.get("shared_prefix"))
    w.shared_prefix = static_cast<int>(get_int(c, *v, "shared_prefix", 0, 1 << 24));
  if (auto v = t.get("prefix_block_tokens"))
    w.prefix_block_tokens = static_cast<int>(get_int(c, *v, "prefix_block_tokens", 1, 1 << 20));
  if (auto v = t.get("limit")) w.limit = static_cast<int>(get_int(c, *v, "limit", 0, 100000000));
  if (auto v = t.get("time_scale")) w.time_scale = get_float(c, *v, "time_scale", 0.0, kMaxTimeScale);
  if (auto v = t.get("max_prompt")) w.max_prompt = static_cast<int>(get_int(c, *v, "max_prompt", 0, 1 << 24));
  if (auto v = t.get("max_output")) w.max_output = static_cast<int>(get_int(c, *v, "max_output", 0, 1 << 24));
  if (auto v = t.get("seed")) w.seed = static_cast<std::uint64_t>(get_int(c, *v, "seed", 0, INT64_MAX));
  if (auto v = t.get("class_mix")) w.class_mix = get_float_list(c, *v, "class_mix");
  if (auto v = t.get("queue_timeout_s")) w.queue_timeout_s = get_float(c, *v, "queue_timeout_s", 0.0, kMaxSeconds);
  if (auto v = t.get("timeout_s")) w.timeout_s = get_float(c, *v, "timeout_s", 0.0, kMaxSeconds);
  if (auto v = t.get("shared_prefix"); v && w.trace.empty() && w.prompt_len.dist != "trace") {
    const int longest = w.prompt_len.dist == "fixed" ? w.prompt_len.value : w.prompt_len.max;
    if (w.shared_prefix > longest)
      throw Error(c.at(*v) + ": shared_prefix = " + std::to_string(w.shared_prefix) +
                  " is longer than any prompt (prompt_len at most " + std::to_string(longest) + "); allowed: 0.." +
                  std::to_string(longest));
  }
  if (auto v = t.get("max_new_tokens")) w.max_new_tokens = static_cast<int>(get_int(c, *v, "max_new_tokens", 0, 1 << 24));
}

// Experiment, variant and sweep names name folders or sit beside them in results: a name is a
// name, never a path.
constexpr std::size_t kMaxNameLength = 128;
constexpr const char* kNameAllowed = "1 to 128 letters, digits and - _ . + = (not . or ..)";

bool name_char(char ch) {
  return std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '_' || ch == '.' || ch == '+' || ch == '=';
}

bool is_safe_name(const std::string& name) {
  return !name.empty() && name.size() <= kMaxNameLength && name != "." && name != ".." &&
         std::all_of(name.begin(), name.end(), name_char);
}

// A byte of a name as a message shows it: itself when printable ASCII, else \xNN.
std::string shown_byte(char ch) {
  const auto b = static_cast<unsigned char>(ch);
  if (b > 0x20 && b < 0x7f) return std::string(1, ch);
  char hex[8];
  std::snprintf(hex, sizeof hex, "\\x%02x", b);
  return hex;
}

// Throws, at `where`, naming `what` (the key) and the allowed set, unless is_safe_name(name).
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

std::vector<std::string> expand_sweep_names(const std::vector<std::pair<std::string, std::vector<const toml::node*>>>& axes,
                                            std::vector<std::vector<const toml::node*>>& points) {
  std::vector<std::string> names;
  std::vector<std::size_t> idx(axes.size(), 0);
  if (axes.empty()) return names;
  while (true) {
    std::string name;
    std::vector<const toml::node*> point;
    for (std::size_t a = 0; a < axes.size(); ++a) {
      const toml::node* n = axes[a].second[idx[a]];
      std::ostringstream os;
      if (auto s = n->as_string(); s && is_safe_name(s->get())) os << s->get();
      else if (auto i = n->as_integer()) os << i->get();
      else if (auto f = n->as_floating_point()) os << f->get();
      else if (auto b = n->as_boolean()) os << (b->get() ? "true" : "false");
      else os << "#" << idx[a] + 1;  // a table, an array (a rule list) or a string that is no name: its position
      name += (name.empty() ? "" : ",") + axes[a].first + "=" + os.str();
      point.push_back(n);
    }
    names.push_back(name);
    points.push_back(point);
    std::size_t a = axes.size();
    while (a > 0) {
      --a;
      if (++idx[a] < axes[a].second.size()) break;
      idx[a] = 0;
      if (a == 0) return names;
    }
  }
}

// A sweep key "scheduler.max_batch" or "kv.block_size" or "attention" applied to a stack.
void apply_sweep_value(const Ctx& c, Stack& s, const std::string& key, const toml::node& v) {
  auto dot = key.find('.');
  std::string head = key.substr(0, dot);
  if (std::find(kStackKeys.begin(), kStackKeys.end(), head) == kStackKeys.end())
    throw Error(c.at(v) + ": sweep key '" + quote_input(key) + "' must start with one of: " + join(kStackKeys));
  if (dot == std::string::npos) {
    apply_stack_key(c, s, head, v);
    return;
  }
  std::string rest = key.substr(dot + 1);
  if (head == "kv") {
    toml::table t;
    t.insert(rest, v);
    Ctx copied = c;
    copied.copied_at = c.at(v);
    parse_kv(copied, t, s.kv);
    s.kv_where = c.at(v);
    return;
  }
  PluginKind k = PluginKind::kAttention;
  stack_key_kind(head, k);  // head is one of kStackKeys and not "kv"
  if (k == PluginKind::kQuantization && rest == "rules") {
    s.quantization_rules = parse_quantization_rules(c, v);
    return;
  }
  s.choice(k).params[rest] = to_param(c, v, rest);
  s.choice(k).where = c.at(v);  // a bad value is reported at its line in [sweep]
}

}  // namespace

namespace {

ExperimentSpec load(const std::string& path, const std::vector<std::string>& overrides, bool refuse_inert);

}  // namespace

ExperimentSpec load_experiment(const std::string& path, const std::vector<std::string>& overrides) {
  return load(path, overrides, true);
}

ExperimentSpec load_resolved_config(const std::string& path) { return load(path, {}, false); }

namespace {

ExperimentSpec load(const std::string& path, const std::vector<std::string>& overrides, bool refuse_inert) {
  ExperimentSpec spec;
  spec.source_path = path;
  spec.overrides = overrides;
  {
    require_regular_file(path, "an experiment TOML file (a results folder is resumed with run --resume DIR)");
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error(path + ": cannot open experiment file");
    std::stringstream buf;
    buf << in.rdbuf();
    spec.source_text = buf.str();
  }
  // TOML 1.0 allows a UTF-8 byte-order mark; the pre-scan would take it for a bare non-ASCII key.
  if (spec.source_text.rfind("\xEF\xBB\xBF", 0) == 0) spec.source_text.erase(0, 3);
  check_toml_text(spec.source_text, path);  // toml++ recurses per key part: bound it first
  toml::table root;
  try {
    root = toml::parse(spec.source_text, path);
  } catch (const toml::parse_error& e) {
    throw Error(path + ":" + std::to_string(e.source().begin.line) + ":" + std::to_string(e.source().begin.column) +
                ": " + std::string(e.description()));
  }
  for (const auto& o : overrides) apply_override(root, o);
  const Ctx c{path, {}};
  const std::string base_dir = fs::path(path).parent_path().string();
  check_keys(c, root, "the experiment file", experiment_keys("file"));

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

  if (auto n = root.get("model")) {
    spec.model = parse_model_table(c, *n, "[model]", base_dir, spec.seed);
  } else {
    throw Error(path + ": missing [model] section (preset = \"stories15m\" or path = \"...\")");
  }

  if (auto n = root.get("device")) {
    const auto& t = get_table(c, *n, "device");
    check_keys(c, t, "[device]", experiment_keys("device"));
    if (auto v = t.get("kind")) {
      const std::string kind = get_string(c, *v, "kind");
      if (!parse_device_kind(kind, spec.device.kind))
        throw Error(c.at(*v) + ": [device] kind = \"" + quote_input(kind) + "\"; allowed: cpu, cuda, sim");
    }
    if (auto v = t.get("threads")) spec.device.threads = static_cast<int>(get_int(c, *v, "threads", 0, 4096));
    if (auto v = t.get("fuse")) {
      check(v->is_boolean(), c.at(*v) + ": 'fuse' must be true or false, got " + type_name(*v));
      spec.device.fuse = v->as_boolean()->get();
      // The CUDA device runs the unfused ops only, and a simulated one has no ops to fuse.
      check(!spec.device.fuse || spec.device.kind == DeviceKind::kCpu,
            c.at(*v) + ": [device] fuse = true is cpu-only (the fused ops are CPU kernels); kind is \"" +
                device_kind_name(spec.device.kind) + "\", allowed there: fuse = false");
    }
    if (auto v = t.get("profile")) {
      const std::string profile = get_string(c, *v, "profile");
      try {
        if (is_calibrated_profile(profile)) {  // a fitted cost model: "calibrated:PATH"
          const std::string path = resolve_data_path(profile.substr(kCalibratedProfile.size()), base_dir, c.at(*v));
          read_cost_model(path);  // malformed files are refused here, with their own file:line
          spec.device.profile = std::string(kCalibratedProfile) + path;
        } else {
          spec.device.profile = hw_profile(profile).name;
        }
      } catch (const Error& e) {
        throw Error(c.at(*v) + ": " + e.what());
      }
    }
    if (auto v = t.get("tp")) spec.device.tp = static_cast<int>(get_int(c, *v, "tp", 1, 1024));
    if (auto v = t.get("pp")) spec.device.pp = static_cast<int>(get_int(c, *v, "pp", 1, 1024));
    if (is_calibrated_profile(spec.device.profile) && (spec.device.tp > 1 || spec.device.pp > 1))
      throw Error(c.file + ": [device] a calibrated profile was measured on one CPU executor, so tp and pp must be 1; "
                           "a hardware profile (a100-40gb, a100-80gb, h100, h200) models parallelism");
  }

  if (auto n = root.get("workload")) parse_workload(c, get_table(c, *n, "workload"), base_dir, spec.workload);

  if (auto n = root.get("slo")) {
    const auto& t = get_table(c, *n, "slo");
    check_keys(c, t, "[slo]", experiment_keys("slo"));
    if (auto v = t.get("class_ttft_ms")) spec.slo.class_ttft_ms = get_float_list(c, *v, "class_ttft_ms");
    if (auto v = t.get("class_tpot_ms")) spec.slo.class_tpot_ms = get_float_list(c, *v, "class_tpot_ms");
    if (auto v = t.get("class_e2e_ms")) spec.slo.class_e2e_ms = get_float_list(c, *v, "class_e2e_ms");
    if (auto v = t.get("ttft_ms")) spec.slo.ttft_ms = get_float(c, *v, "ttft_ms", 0);
    if (auto v = t.get("tpot_ms")) spec.slo.tpot_ms = get_float(c, *v, "tpot_ms", 0);
    if (auto v = t.get("e2e_ms")) spec.slo.e2e_ms = get_float(c, *v, "e2e_ms", 0);
  }

  if (auto n = root.get("quality")) {
    const auto& t = get_table(c, *n, "quality");
    check_keys(c, t, "[quality]", experiment_keys("quality"));
    spec.quality.enabled = true;
    auto v = t.get("text");
    if (!v) throw Error(c.at(*n) + ": [quality] needs 'text' (a UTF-8 text file)");
    spec.quality.text = resolve_data_path(get_string(c, *v, "text"), base_dir, c.at(*v));
    // An empty text (or a folder, /dev/null) gives fewer than the 2 tokens perplexity needs.
    std::error_code ec;
    try {
      check_text_file(spec.quality.text, "[quality] text");
    } catch (const Error& e) {
      throw Error(c.at(*v) + ": " + e.what());
    }
    if (fs::file_size(spec.quality.text, ec) == 0)
      throw Error(c.at(*v) + ": [quality] text " + spec.quality.text +
                  " is empty or not a regular file; allowed: a UTF-8 text file with at least one character");
    if (auto m = t.get("max_tokens")) spec.quality.max_tokens = static_cast<int>(get_int(c, *m, "max_tokens", 2, 1 << 24));
    if (auto m = t.get("context")) {
      spec.quality.context = static_cast<int>(get_int(c, *m, "context", 0, 1 << 24));
      if (spec.quality.context == 1)  // a 1-token window predicts nothing
        throw Error(c.at(*m) + ": 'context' = 1 is out of range; allowed: 0 (the model's context) or >= 2");
    }
  }

  spec.calibration.seed = spec.seed;
  if (auto n = root.get("calibration")) {
    const auto& t = get_table(c, *n, "calibration");
    check_keys(c, t, "[calibration]", experiment_keys("calibration"));
    spec.calibration.enabled = true;
    if (auto m = t.get("tokens")) spec.calibration.tokens = static_cast<int>(get_int(c, *m, "tokens", 2, 1 << 20));
    if (auto m = t.get("seq_len")) spec.calibration.seq_len = static_cast<int>(get_int(c, *m, "seq_len", 2, 1 << 16));
    if (auto m = t.get("seed")) spec.calibration.seed = static_cast<std::uint64_t>(get_int(c, *m, "seed", 0, INT64_MAX));
    auto v = t.get("text");
    if (!v) throw Error(c.at(*n) + ": [calibration] needs 'text' (a UTF-8 text file of at least 'tokens' tokens)");
    spec.calibration.text = resolve_data_path(get_string(c, *v, "text"), base_dir, c.at(*v));
    std::error_code ec;
    try {
      check_text_file(spec.calibration.text, "[calibration] text");
    } catch (const Error& e) {
      throw Error(c.at(*v) + ": " + e.what());
    }
    if (fs::file_size(spec.calibration.text, ec) == 0)
      throw Error(c.at(*v) + ": [calibration] text " + spec.calibration.text +
                  " is empty or not a regular file; allowed: a UTF-8 text file of at least 'tokens' tokens");
    // A token covers at least one byte (one more for the BOS), so a shorter file cannot hold
    // `tokens` tokens whatever the tokenizer; the exact count is checked once it is tokenized.
    const auto bytes = fs::file_size(spec.calibration.text, ec);
    if (bytes + 1 < static_cast<std::uintmax_t>(spec.calibration.tokens))
      throw Error(c.at(*v) + ": [calibration] text " + spec.calibration.text + " has " + std::to_string(bytes) +
                  " bytes, too short for tokens = " + std::to_string(spec.calibration.tokens) +
                  "; allowed: a longer text or fewer tokens");
  }

  if (auto n = root.get("plugins")) {
    const auto& t = get_table(c, *n, "plugins");
    check_keys(c, t, "[plugins]", experiment_keys("plugins"));
    if (auto v = t.get("paths")) {
      auto arr = v->as_array();
      if (!arr) throw Error(c.at(*v) + ": plugins.paths must be an array of folders");
      for (const auto& p : *arr) spec.plugin_paths.push_back(resolve_data_path(get_string(c, p, "paths"), base_dir, c.at(p)));
    }
  }

  Variant baseline{"baseline", {}};
  if (auto n = root.get("baseline")) {
    const auto& t = get_table(c, *n, "baseline");
    check_keys(c, t, "[baseline]", kStackKeys);
    for (auto&& [k, v] : t) apply_stack_key(c, baseline.stack, std::string(k.str()), v);
  }
  for (PluginKind k : kStackKinds)
    if (baseline.stack.choice(k).where.empty()) baseline.stack.choice(k).where = path + " (default)";
  spec.variants.push_back(baseline);

  std::set<std::string> names{"baseline"};
  if (auto n = root.get("variant")) {
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
  }

  if (auto n = root.get("sweep")) {
    const auto& t = get_table(c, *n, "sweep");
    std::vector<std::pair<std::string, std::vector<const toml::node*>>> axes;
    for (auto&& [k, v] : t) {
      auto arr = v.as_array();
      if (!arr || arr->empty()) throw Error(c.at(v) + ": sweep '" + quote_input(k.str()) + "' must be a non-empty array of values");
      check_name(c.at(v), "[sweep] key", std::string(k.str()));  // it names every point of its axis
      std::vector<const toml::node*> values;
      for (const auto& x : *arr) values.push_back(&x);
      axes.emplace_back(std::string(k.str()), values);
    }
    std::uint64_t grid = 1;
    for (const auto& axis : axes) {
      grid *= axis.second.size();
      if (grid > kMaxSweepPoints)
        throw Error(c.at(*n) + ": [sweep] grid has more than " + std::to_string(kMaxSweepPoints) +
                    " points (the product of its axis lengths); allowed: at most " + std::to_string(kMaxSweepPoints));
    }
    std::vector<std::vector<const toml::node*>> points;
    auto sweep_names = expand_sweep_names(axes, points);
    for (std::size_t p = 0; p < points.size(); ++p) {
      Variant v{sweep_names[p], baseline.stack};
      for (std::size_t a = 0; a < axes.size(); ++a) apply_sweep_value(c, v.stack, axes[a].first, *points[p][a]);
      if (!names.insert(v.name).second) throw Error(c.at(*n) + ": duplicate variant name '" + v.name + "'");
      spec.variants.push_back(std::move(v));
    }
  }
  if (refuse_inert) refuse_inert_keys(c, root, spec);
  return spec;
}

}  // namespace

}  // namespace inferlab
