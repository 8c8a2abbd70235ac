#include "inferlab/kv/memory_estimate.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <memory>
#include <stdexcept>
#include <string_view>
#include <tuple>
#include <utility>
#include <variant>
#include <vector>

#include "inferlab/device/device.h"
#include "inferlab/engine/engine.h"
#include "inferlab/error.h"
#include "inferlab/formats/formats.h"
#include "inferlab/experiment/input_checks.h"
#include "inferlab/kv/kv_storage.h"
#include "inferlab/plugin/quantization.h"
#include "inferlab/experiment/quantization_rules.h"
#include "inferlab/plugin/registry.h"
#include "inferlab/run/runner.h"
#include "inferlab/workload/workload.h"

namespace inferlab {
namespace fs = std::filesystem;

namespace {

constexpr std::uint64_t kF32 = sizeof(float);

}  // namespace

// The cell's model as Model builds it: fp32 norms and biases; quantized linears, each asked of
// the strategy that builds it (per-layer rules give layers different methods), the embedding
// table among them when the classifier is not tied (a tied lookup reads the classifier's rows).
// Linears of one shape and source type under one strategy are asked once (the classifier and
// the embedding each on its own: skip_classifier keeps only the first in fp32).
std::uint64_t estimate_model_bytes(Quantization& quant, const ModelConfig& c) {
  const std::uint64_t d = static_cast<std::uint64_t>(c.dim), kv = static_cast<std::uint64_t>(c.kv_dim());
  const auto* ruled = dynamic_cast<const RuledQuantization*>(&quant);
  std::map<std::tuple<const Quantization*, int, int, std::string, std::int64_t>, std::uint64_t> asked;
  std::uint64_t bytes = d * kF32;  // final norm
  bytes += static_cast<std::uint64_t>(c.n_layers) * (2 * d * kF32 + (c.qkv_bias ? (d + 2 * kv) * kF32 : 0));
  for (const LinearSlot& l : model_linears(c)) {
    Quantization& q = ruled ? ruled->strategy_for(l.name) : quant;
    // The classifier may be stored apart (skip_classifier); the layers' linears by shape.
    const auto type = c.source_linear_types.find(l.name);
    const auto key = std::make_tuple(&q, l.out, l.in, l.layer < 0 ? l.name : std::string(),
                                     type == c.source_linear_types.end() ? std::int64_t{-1} : std::int64_t{type->second});
    auto it = asked.find(key);
    if (it == asked.end()) it = asked.emplace(key, q.planned_bytes(l.name, l.out, l.in, c)).first;
    bytes += it->second;
  }
  return bytes;
}

namespace {

std::int64_t int_param(const Params& p, const std::string& name, std::int64_t fallback) {
  const auto it = p.values().find(name);
  if (it == p.values().end()) return fallback;
  const auto* v = std::get_if<std::int64_t>(&it->second);
  return v ? *v : fallback;
}

std::string fixed(double v, int digits) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

}  // namespace

std::uint64_t loaded_weight_bytes(const ModelConfig& c, bool seeded) {
  std::uint64_t bytes = static_cast<std::uint64_t>(c.parameter_count()) * kF32, transient = 0;
  for (const LinearSlot& l : model_linears(c)) {
    const std::uint64_t n = static_cast<std::uint64_t>(l.out) * static_cast<std::uint64_t>(l.in);
    const auto t = c.source_linear_types.find(l.name);
    if (seeded) {
      bytes -= n * kF32;
    } else if (t != c.source_linear_types.end() && ggml_type_supported(t->second) &&
               ggml_type_is_quantized(static_cast<GgmlType>(t->second))) {
      bytes -= n * kF32 - ggml_tensor_bytes(static_cast<GgmlType>(t->second), n);
    } else {
      continue;
    }
    transient = std::max(transient, n * kF32);
  }
  return bytes + transient;
}

std::string format_bytes(std::uint64_t bytes) {
  static const char* const kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
  if (bytes < 1024) return std::to_string(bytes) + " B";
  double v = static_cast<double>(bytes) / 1024.0;
  int u = 0;
  while (v >= 1024.0 && u < 4) v /= 1024.0, ++u;
  return fixed(v, v < 10 ? 2 : 1) + " " + kUnits[u];
}

std::string MemoryEstimate::describe() const {
  std::string s = format_bytes(total()) + " = weights " + format_bytes(source_weights) + " (as loaded, once)";
  if (variant_weights) s += " + " + format_bytes(variant_weights) + " (variant '" + weights_variant + "')";
  if (kv_pool) s += " + KV pool " + format_bytes(kv_pool) + " (variant '" + kv_variant + "')";
  if (activations) s += " + activations " + format_bytes(activations);
  s += " + prompts " + format_bytes(prompts);
  if (process) s += " + process " + format_bytes(process);
  return s;
}

namespace {

// Resident bytes of this process (code, libraries, heap so far): /proc/self/statm's second
// field, in pages; 0 where it cannot be read.
std::uint64_t resident_bytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return 0;
  unsigned long long size = 0, resident = 0;
  const int n = std::fscanf(f, "%llu %llu", &size, &resident);
  std::fclose(f);
  return n == 2 ? resident * static_cast<std::uint64_t>(sysconf(_SC_PAGE_SIZE)) : 0;
}

}  // namespace

MemoryEstimate estimate_run_memory(const Plan& plan, const Registry& registry, const ModelConfig& model) {
  const ExperimentSpec& spec = plan.spec;
  const std::vector<RequestLengths> lengths = workload_lengths(spec.workload);
  std::uint64_t prompt_tokens = 0, output_tokens = 0, longest = 0;
  for (const RequestLengths& r : lengths) {
    prompt_tokens += static_cast<std::uint64_t>(r.prompt);
    output_tokens += static_cast<std::uint64_t>(r.output);
    longest = std::max<std::uint64_t>(longest, static_cast<std::uint64_t>(r.prompt));
  }
  MemoryEstimate e;
  // Request prompts (int32), generated ids (int32) and their times (double).
  e.prompts = prompt_tokens * 4 + output_tokens * 12;
  e.process = resident_bytes();
  if (spec.device.kind == DeviceKind::kSim) return e;

  e.source_weights = loaded_weight_bytes(model, !spec.model.preset.empty());
  const std::uint64_t n = lengths.size();
  CpuDevice host(1);
  for (const ResolvedVariant& v : plan.variants) {
    auto quant = make_variant_quantization(registry, v, host);
    const std::uint64_t weights = estimate_model_bytes(*quant, model);
    if (weights > e.variant_weights) e.variant_weights = weights, e.weights_variant = v.name;

    const KvCacheConfig& kv = v.stack.kv;
    const std::uint64_t bs = static_cast<std::uint64_t>(std::max(1, kv.block_size));
    const std::uint64_t block_bytes = std::max<std::uint64_t>(1, KvStorage::bytes_per_token(model, kv.format) * bs);
    std::uint64_t blocks = static_cast<std::uint64_t>(std::max(0, kv.num_blocks));
    if (blocks == 0 && kv.memory_mb > 0) blocks = std::max<std::uint64_t>(1, (static_cast<std::uint64_t>(kv.memory_mb) << 20) / block_bytes);
    if (blocks == 0) {  // the engine's sizing (Engine::run), without draft tokens
      for (const RequestLengths& r : lengths) blocks += (static_cast<std::uint64_t>(r.prompt + r.output) + bs - 1) / bs;
      blocks = std::max<std::uint64_t>(1, std::min(blocks, static_cast<std::uint64_t>(kAutoKvPoolBytes) / block_bytes));
    }
    if (blocks * block_bytes > e.kv_pool) e.kv_pool = blocks * block_bytes, e.kv_variant = v.name;

    // The largest step: a token budget (max_tokens) caps it, or else max_batch prompts at once;
    // a prompt longer than the budget runs alone. Every row holds the residual stream and the
    // block's intermediates (model.cpp's scratch); each sequence a row of logits, on the device
    // and in the host copy.
    const std::uint64_t batch = std::min<std::uint64_t>(n, static_cast<std::uint64_t>(int_param(v.scheduler, "max_batch", static_cast<std::int64_t>(n))));
    const std::int64_t budget = int_param(v.scheduler, "max_tokens", 0);
    std::uint64_t rows = budget > 0 ? std::max<std::uint64_t>(static_cast<std::uint64_t>(budget), longest) : batch * longest + batch;
    rows = std::min(rows, prompt_tokens + n);
    const std::uint64_t row_floats = 5ull * static_cast<std::uint64_t>(model.dim) +
                                     2ull * static_cast<std::uint64_t>(model.kv_dim()) +
                                     2ull * static_cast<std::uint64_t>(model.hidden_dim);
    const std::uint64_t act = rows * row_floats * kF32 + 2 * batch * static_cast<std::uint64_t>(model.vocab_size) * kF32;
    e.activations = std::max(e.activations, act);
  }
  return e;
}

std::uint64_t cgroup_memory_limit(const std::string& proc_self_cgroup, const std::string& sys_root, std::string* file) {
  std::uint64_t best = 0;
  auto consider = [&](const fs::path& f) {
    std::ifstream in(f);
    std::string text;
    if (!(in >> text) || text == "max") return;
    std::uint64_t v = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || end != text.data() + text.size() || v == 0 || v >= (1ull << 62)) return;  // v1: "unlimited"
    if (best == 0 || v < best) {
      best = v;
      if (file) *file = f.string();
    }
  };
  std::istringstream lines(proc_self_cgroup);
  for (std::string line; std::getline(lines, line);) {
    // "0::/path" (v2) or "4:memory:/path" (v1; the controller list may hold others, "4:memory,foo:/p").
    const auto c1 = line.find(':'), c2 = line.find(':', c1 == std::string::npos ? c1 : c1 + 1);
    if (c1 == std::string::npos || c2 == std::string::npos) continue;
    const std::string controllers = line.substr(c1 + 1, c2 - c1 - 1);
    fs::path group = fs::path(line.substr(c2 + 1)).relative_path();
    bool v1_memory = false;
    for (std::size_t b = 0; b <= controllers.size();) {
      const std::size_t e = std::min(controllers.find(',', b), controllers.size());
      v1_memory = v1_memory || controllers.substr(b, e - b) == "memory";
      b = e + 1;
    }
    if (!controllers.empty() && !v1_memory) continue;
    const fs::path root = controllers.empty() ? fs::path(sys_root) : fs::path(sys_root) / "memory";
    const char* name = controllers.empty() ? "memory.max" : "memory.limit_in_bytes";
    // The group and each ancestor: a parent's limit binds its children too. (Inside a cgroup
    // namespace the path may not exist under sys_root; the root's own file is read all the same.)
    for (fs::path g = group;; g = g.parent_path()) {
      consider(root / g / name);
      if (g.empty()) break;
    }
  }
  return best;
}

MemoryLimit memory_limit() {
  MemoryLimit m;
  m.bytes = static_cast<std::uint64_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<std::uint64_t>(sysconf(_SC_PAGE_SIZE));
  m.what = "this machine has " + format_bytes(m.bytes);
  struct rlimit as {};
  if (getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY && as.rlim_cur < m.bytes) {
    m.bytes = as.rlim_cur;
    m.what = "this process's address-space limit (RLIMIT_AS, ulimit -v) is " + format_bytes(m.bytes);
    m.enforced = true;
  }
  std::ifstream in("/proc/self/cgroup");
  std::stringstream text;
  text << in.rdbuf();
  std::string file;
  if (const std::uint64_t cg = cgroup_memory_limit(text.str(), "/sys/fs/cgroup", &file); cg > 0 && cg < m.bytes) {
    m.bytes = cg;
    m.what = "its cgroup's memory limit (" + file + ") is " + format_bytes(m.bytes);
    m.enforced = true;
  }
  return m;
}

std::uint64_t machine_memory_bytes() { return memory_limit().bytes; }

std::uint64_t parse_memory_size(const std::string& text, const std::string& where) {
  const std::string allowed =
      "allowed: a positive number with an optional unit B, KB, MB, GB, TB (powers of 1000), KiB, MiB, GiB, TiB "
      "or K, M, G, T (powers of 1024), e.g. 16GiB or 512M";
  std::size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
  // An exponent (1e3GiB) belongs to the number, not to the unit.
  if (i > 0 && i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    std::size_t k = i + 1 + (i + 1 < text.size() && (text[i + 1] == '+' || text[i + 1] == '-'));
    if (k < text.size() && std::isdigit(static_cast<unsigned char>(text[k]))) {
      while (k < text.size() && std::isdigit(static_cast<unsigned char>(text[k]))) ++k;
      i = k;
    }
  }
  const std::string number = text.substr(0, i);
  std::size_t j = i;
  while (j < text.size() && text[j] == ' ') ++j;
  std::string unit = text.substr(j);
  for (char& ch : unit) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  double value = 0;
  std::size_t used = 0;
  bool overflow = false;
  try {
    value = number.empty() ? 0 : std::stod(number, &used);
  } catch (const std::out_of_range&) {  // 1e400: a number, too large for any memory
    overflow = true;
    used = number.size();
  } catch (const std::exception&) {
    used = 0;
  }
  if (number.empty() || used != number.size() || !(overflow || value > 0))
    throw Error(where + " " + quote_input(text) + ": not a positive number; " + allowed);
  if (overflow || !std::isfinite(value))
    throw Error(where + " " + quote_input(text) + ": out of range; " + allowed + " (at most 16 EiB)");
  static const std::pair<const char*, double> kUnits[] = {
      {"", 1}, {"B", 1}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
      {"KIB", 1024.0}, {"MIB", 1048576.0}, {"GIB", 1073741824.0}, {"TIB", 1099511627776.0},
      {"K", 1024.0}, {"M", 1048576.0}, {"G", 1073741824.0}, {"T", 1099511627776.0}};
  for (const auto& [name, scale] : kUnits) {
    if (unit != name) continue;
    const double bytes = value * scale;
    if (bytes < 1 || bytes > 1.8e19) throw Error(where + " " + quote_input(text) + ": out of range; " + allowed + " (at most 16 EiB)");
    return static_cast<std::uint64_t>(bytes);
  }
  throw Error(where + " " + quote_input(text) + ": unknown unit '" + quote_input(text.substr(j)) + "'; " + allowed);
}

}  // namespace inferlab
