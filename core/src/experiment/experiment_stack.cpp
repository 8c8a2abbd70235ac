// Stack keys and [sweep] points (see experiment_stack.h).
#include "experiment/experiment_stack.h"

#include <algorithm>
#include <sstream>
#include <utility>

#include "inferlab/experiment/experiment_keys.h"
#include "inferlab/experiment/input_checks.h"

namespace inferlab {

using namespace experiment_parse;  // Ctx, check_keys, get_* (experiment_parse.h)

namespace {

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
  if (auto v = t.get("group_size"); v && !kv.format.quantized())
    throw Error(c.at(*v) + ": kv.group_size shapes an int8/int4 KV cache but kv.dtype is " + kv.format.dtype_name() +
                "; allowed: only with kv.dtype int8, int4, int8-keys, int4-keys, int8-values or int4-values");
  for (const char* key : {"f32_first_layers", "f32_last_layers"})
    if (auto v = t.get(key); v && kv.format.all_f32())
      throw Error(c.at(*v) + ": kv." + key + " keeps layers of a narrower KV cache in f32 but kv.dtype is f32; " +
                  "allowed: only with kv.dtype f16, bf16, int8, int4, int8-keys, int4-keys, int8-values or int4-values");
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

}  // namespace

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

namespace {

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

void add_sweep_variants(const Ctx& c, const toml::node& sweep, const Stack& base, std::set<std::string>& names,
                        std::vector<Variant>& variants) {
  const toml::node* n = &sweep;
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
    Variant v{sweep_names[p], base};
    for (std::size_t a = 0; a < axes.size(); ++a) apply_sweep_value(c, v.stack, axes[a].first, *points[p][a]);
    if (!names.insert(v.name).second) throw Error(c.at(*n) + ": duplicate variant name '" + v.name + "'");
    variants.push_back(std::move(v));
  }
}

}  // namespace inferlab
