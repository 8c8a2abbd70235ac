// Reading and checking published claims (see inferlab/repro/reproduce.h, docs/reproductions.md).
#include "inferlab/repro/reproduce.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <unistd.h>

#include "inferlab/experiment/tomlpp.h"

#include "inferlab/repro/attention_io.h"
#include "inferlab/repro/attention_memory.h"
#include "inferlab/engine/batch.h"
#include "inferlab/error.h"
#include "inferlab/experiment/toml_input.h"
#include "inferlab/experiment/experiment.h"
#include "inferlab/model/model_config.h"
#include "inferlab/repro/radix_order.h"
#include "inferlab/run/runner.h"
#include "inferlab/sim/sim.h"

namespace inferlab {

namespace fs = std::filesystem;

double spec_expected_tokens(double alpha, int gamma) {
  if (alpha >= 1.0) return gamma + 1.0;
  return (1.0 - std::pow(alpha, gamma + 1)) / (1.0 - alpha);
}

double spec_speedup(double alpha, int gamma, double c) { return spec_expected_tokens(alpha, gamma) / (gamma * c + 1.0); }

double sarathi_max_decodes(double gpu_bytes, double param_bytes, double max_seq_len, double kv_bytes_per_token) {
  check(gpu_bytes > 0 && param_bytes >= 0 && max_seq_len >= 1 && kv_bytes_per_token > 0,
        "sarathi_max_decodes: needs M_G > 0, M_S >= 0, L >= 1 and m_kv > 0");
  return std::max(0.0, std::floor((gpu_bytes - param_bytes) / (max_seq_len * kv_bytes_per_token)));
}

namespace {

// Every quantity a claim may name and what measuring it needs (one list: read_claims refuses the
// others, `validate` plans a run only for the kRun ones, measure() below computes each).
constexpr std::pair<const char*, ClaimUse> kClaimQuantities[] = {
    {"kv_bytes_per_token", ClaimUse::kModel},       {"kv_slots", ClaimUse::kModel},
    {"spec_expected_tokens", ClaimUse::kArguments}, {"spec_speedup", ClaimUse::kArguments},
    {"ratio", ClaimUse::kRun},                      {"difference", ClaimUse::kRun},
    {"metric", ClaimUse::kRun},                     {"spec_tokens_over_eq1", ClaimUse::kRun},
    {"spec_speedup_over_theorem", ClaimUse::kRun},  {"attention_memory_mib", ClaimUse::kArguments},
    {"capacity_ratio", ClaimUse::kRun},             {"spec_latency_reduction", ClaimUse::kArguments},
    {"tp_speedup", ClaimUse::kRun},                 {"radix_dfs_optimal_fraction", ClaimUse::kArguments},
    {"attention_io_exponent", ClaimUse::kArguments}, {"sarathi_max_decodes", ClaimUse::kModel},
    {"quant_decode_speedup", ClaimUse::kModel},
};

std::string claim_quantity_names() {
  std::string names;
  for (const auto& [name, use] : kClaimQuantities) names += (names.empty() ? "" : ", ") + std::string(name);
  return names;
}

Claim parse_claim(const toml::table& t, const std::string& path) {
  Claim c;
  c.file = path;
  for (const auto& [k, v] : t) {
    const std::string key(k.str());
    if (auto s = v.value<std::string>()) {
      if (key == "source") c.source = *s;
      else if (key == "text") c.text = *s;
      else if (key == "quantity") c.quantity = *s;
      else if (key == "class") c.cls = *s;
      else if (key == "compare") c.compare = *s;
      else c.names[key] = *s;
    } else if (auto d = v.value<double>()) {
      if (key == "expected") c.expected = *d;
      else if (key == "tolerance") c.tolerance = *d;
      else c.args[key] = *d;
    } else {
      throw Error(path + ": [claim] " + key + " must be a string or a number");
    }
  }
  if (c.cls != "exact" && c.cls != "cpu" && c.cls != "gpu")
    throw Error(path + ": [claim] class = \"" + c.cls + "\"; allowed: exact, cpu, gpu");
  if (c.compare != "approx" && c.compare != "greater" && c.compare != "less")
    throw Error(path + ": [claim] compare = \"" + c.compare + "\"; allowed: approx, greater, less");
  if (c.quantity.empty()) throw Error(path + ": [claim] needs a quantity");
  if (claim_quantity_use(c.quantity) == ClaimUse::kUnknown)
    throw Error(path + ": [claim] quantity = \"" + c.quantity + "\"; allowed: " + claim_quantity_names());
  return c;
}

double arg(const Claim& c, const std::string& name) {
  auto it = c.args.find(name);
  if (it == c.args.end()) throw Error(c.file + ": claim '" + c.quantity + "' needs " + name);
  return it->second;
}
std::string name_arg(const Claim& c, const std::string& name) {
  auto it = c.names.find(name);
  if (it == c.names.end()) throw Error(c.file + ": claim '" + c.quantity + "' needs " + name);
  return it->second;
}

std::vector<std::string> split_csv_line(const std::string& line) {
  std::vector<std::string> out;
  std::string cur;
  bool quoted = false;
  for (char ch : line) {
    if (ch == '"') quoted = !quoted;
    else if (ch == ',' && !quoted) {
      out.push_back(cur);
      cur.clear();
    } else cur += ch;
  }
  out.push_back(cur);
  return out;
}

// Mean of `metric` over the variant's rows of a results folder's metrics.csv.
double mean_metric(const std::string& dir, const std::string& variant, const std::string& metric) {
  std::ifstream in(fs::path(dir) / "metrics.csv");
  std::string line;
  std::getline(in, line);
  const auto header = split_csv_line(line);
  std::size_t col = header.size();
  for (std::size_t i = 0; i < header.size(); ++i)
    if (header[i] == metric) col = i;
  if (col == header.size()) throw Error(dir + "/metrics.csv has no metric '" + metric + "'");
  double sum = 0;
  int n = 0;
  while (std::getline(in, line)) {
    const auto f = split_csv_line(line);
    if (f.size() <= col || f[0] != variant) continue;
    if (f[2] != "ok") throw Error("variant '" + variant + "' failed: " + f[3]);
    sum += std::stod(f[col]);
    ++n;
  }
  if (n == 0) throw Error(dir + "/metrics.csv has no rows of variant '" + variant + "'");
  return sum / n;
}

// A claim's experiment must be simulated (the claim then holds on any machine), except for a
// class cpu claim, whose point is to measure this CPU.
void check_claim_device(const Claim& c, const ExperimentSpec& spec) {
  if (spec.device.kind != DeviceKind::kSim && c.cls != "cpu")
    throw Error(c.file + ": a '" + c.quantity + "' claim of class " + c.cls +
                " runs its experiment, which must be [device] kind = \"sim\" (only a class cpu claim runs on this CPU)");
}

// The claim file's experiment, run into a scratch folder removed afterwards.
struct SimRun {
  Plan plan;
  std::string root, dir;
  SimRun(const Claim& c, const ExperimentSpec& spec, const Registry& registry, const ModelConfig& model) {
    check_claim_device(c, spec);
    plan = plan_experiment(spec, registry, model);
    RunOptions options;
    static int runs = 0;
    root = options.out_root =
        (fs::temp_directory_path() / ("inferlab-repro-" + std::to_string(::getpid()) + "-" + std::to_string(runs++))).string();
    dir = run_plan(plan, registry, options).dir;
  }
  ~SimRun() {
    std::error_code ec;
    fs::remove_all(root, ec);
  }
  SimRun(const SimRun&) = delete;
  SimRun& operator=(const SimRun&) = delete;
};

// One run per claim file: its claims share the experiment (kept until the program exits).
const SimRun& sim_run(const Claim& c, const ExperimentSpec& spec, const Registry& registry, const ModelConfig& model) {
  check_claim_device(c, spec);  // also for a claim that finds the run already made by a cpu claim
  static std::map<std::string, std::unique_ptr<SimRun>> runs;
  auto& run = runs[c.file];
  if (!run) run = std::make_unique<SimRun>(c, spec, registry, model);
  return *run;
}

// Whether every request of `variant` finished and its `metric` (mean over repeats) is at most
// `limit` (and `queue_metric` at most `queue_limit`, when the claim names one) when the claim
// file's experiment runs (only that variant) at arrival rate `rate`.
bool meets_slo(const Claim& c, const Registry& registry, const std::string& variant, double rate) {
  char set[64];
  std::snprintf(set, sizeof set, "workload.rate=%.9g", rate);
  ExperimentSpec spec = load_experiment(c.file, {set});
  std::erase_if(spec.variants, [&](const Variant& v) { return v.name != variant; });
  if (spec.variants.empty()) throw Error(c.file + ": no variant '" + variant + "'");
  const SimRun run(c, spec, registry, experiment_model_config(spec.model));
  const bool queue_ok = c.names.count("queue_metric") == 0 ||
                        mean_metric(run.dir, variant, name_arg(c, "queue_metric")) <= arg(c, "queue_limit");
  return queue_ok && mean_metric(run.dir, variant, "requests_unfinished") == 0 &&
         mean_metric(run.dir, variant, name_arg(c, "metric")) <= arg(c, "limit");
}

// `metric` of `variant` with the file's experiment run at [device] tp = `tp` over the same at
// tp = 1 (tensor parallelism in the simulator: per-layer work / tp, two ring all-reduces).
double tp_speedup(const Claim& c, const Registry& registry) {
  const std::string variant = name_arg(c, "variant"), metric = name_arg(c, "metric");
  auto at_tp = [&](int tp) {
    ExperimentSpec spec = load_experiment(c.file, {"device.tp=" + std::to_string(tp)});
    if (spec.device.kind != DeviceKind::kSim) throw Error(c.file + ": a tp_speedup claim runs its experiment, which must be simulated");
    std::erase_if(spec.variants, [&](const Variant& v) { return v.name != variant; });
    if (spec.variants.empty()) throw Error(c.file + ": no variant '" + variant + "'");
    const SimRun run(c, spec, registry, experiment_model_config(spec.model));
    return mean_metric(run.dir, variant, metric);
  };
  return at_tp(static_cast<int>(arg(c, "tp"))) / at_tp(1);
}

double capacity_search(const Claim& c, const Registry& registry, const std::string& variant);

// Capacity (Sarathi-Serve §5): the highest arrival rate at which `variant` still meets the SLO
// (metric <= limit, and queue_metric <= queue_limit when given: a finite workload otherwise
// "meets" a TBT SLO at any rate, its excess just waiting in the queue), bisected geometrically
// between rate_min (must meet it) and rate_max over `steps` runs; rate_max when even that meets
// it.
double capacity(const Claim& c, const Registry& registry, const std::string& variant) {
  // Claims of one file that ask the same (variant, SLO, search) share the answer.
  std::ostringstream key;
  key << c.file << '|' << variant;
  for (const char* k : {"metric", "queue_metric"}) key << '|' << (c.names.count(k) ? c.names.at(k) : "");
  for (const char* k : {"limit", "queue_limit", "rate_min", "rate_max", "steps"}) key << '|' << (c.args.count(k) ? c.args.at(k) : 0.0);
  static std::map<std::string, double> known;
  if (auto it = known.find(key.str()); it != known.end()) return it->second;
  const double answer = capacity_search(c, registry, variant);
  known[key.str()] = answer;
  return answer;
}

double capacity_search(const Claim& c, const Registry& registry, const std::string& variant) {
  double lo = arg(c, "rate_min"), hi = arg(c, "rate_max");
  const int steps = static_cast<int>(arg(c, "steps"));
  if (!(lo > 0 && hi > lo && steps >= 1 && steps <= 40))
    throw Error(c.file + ": capacity needs 0 < rate_min < rate_max and 1 <= steps <= 40");
  if (!meets_slo(c, registry, variant, lo))
    throw Error(c.file + ": variant '" + variant + "' misses the SLO already at rate_min = " + std::to_string(lo) +
                "; lower rate_min");
  if (meets_slo(c, registry, variant, hi)) return hi;
  for (int i = 0; i < steps; ++i) {
    const double mid = std::sqrt(lo * hi);
    (meets_slo(c, registry, variant, mid) ? lo : hi) = mid;
  }
  return lo;
}

// Exponent `exponent` (n, d, m or bound) of the HBM accesses of the instrumented `algorithm`
// fitted over the claim's grid (core/src/repro/attention_io.cpp). A file's claims on the same
// algorithm and grid share one fit.
double attention_io_exponent(const Claim& c) {
  const AttentionIoAlgorithm algorithm = parse_attention_io_algorithm(name_arg(c, "algorithm"), c.file);
  const AttentionIoGrid grid{static_cast<int>(arg(c, "seq_min")),      static_cast<int>(arg(c, "seq_max")),
                             static_cast<int>(arg(c, "head_dim_min")), static_cast<int>(arg(c, "head_dim_max")),
                             static_cast<std::size_t>(arg(c, "sram_min")), static_cast<std::size_t>(arg(c, "sram_max"))};
  std::ostringstream key;
  key << c.file << '|' << name_arg(c, "algorithm") << '|' << grid.n_min << '|' << grid.n_max << '|' << grid.d_min << '|'
      << grid.d_max << '|' << grid.m_min << '|' << grid.m_max;
  static std::map<std::string, AttentionIoFit> fits;
  auto it = fits.find(key.str());
  if (it == fits.end()) it = fits.emplace(key.str(), fit_attention_io(algorithm, grid)).first;
  const std::string e = name_arg(c, "exponent");
  if (e == "n") return it->second.exp_n;
  if (e == "d") return it->second.exp_d;
  if (e == "m") return it->second.exp_m;
  if (e == "bound") return it->second.bound_slope;
  throw Error(c.file + ": attention_io_exponent exponent = \"" + e + "\"; allowed: n, d, m, bound");
}

// Roofline decode step (the file's [model] on its [device] profile; `batch` sequences at
// `context` tokens each) with bf16 weights over the same with `weight_bytes` per weight: the
// bytes model of weight quantization. The ratio nears 2 / weight_bytes while the step is bound
// by reading the weights and falls toward 1 as the batch makes it compute bound.
double quant_decode_speedup(const Claim& c, const ExperimentSpec& spec, const ModelConfig& model) {
  if (spec.device.kind != DeviceKind::kSim) throw Error(c.file + ": quant_decode_speedup needs [device] kind = \"sim\" (its profile)");
  const int batch = static_cast<int>(arg(c, "batch")), context = static_cast<int>(arg(c, "context"));
  if (batch < 1 || context < 1 || arg(c, "weight_bytes") <= 0)
    throw Error(c.file + ": quant_decode_speedup needs batch >= 1, context >= 1 and weight_bytes > 0");
  SimOptions bf16;
  bf16.profile = hw_profile(spec.device.profile);
  SimOptions quantized = bf16;
  quantized.weight_bytes = arg(c, "weight_bytes");
  StepBatch step;  // `batch` decode rows, each over `context` tokens of K/V
  const int block = 16;
  std::vector<int> table((context + block - 1) / block);
  for (std::size_t i = 0; i < table.size(); ++i) table[i] = static_cast<int>(i);
  for (int s = 0; s < batch; ++s) {
    const std::vector<int> token{5};
    step.add_sequence(token, context - 1, table, block, 0, 1);
  }
  return step_cost(model, bf16, step).total() / step_cost(model, quantized, step).total();
}

double measure(const Claim& c, const Registry& registry) {
  if (c.quantity == "attention_memory_mib") {
    const std::string algorithm = name_arg(c, "algorithm");
    const AttentionShape shape{arg(c, "batch"), arg(c, "heads"), arg(c, "seq"), arg(c, "head_dim")};
    return attention_memory_bytes(parse_attention_memory_algorithm(algorithm, c.file), shape) / (1 << 20);
  }
  if (c.quantity == "attention_io_exponent") return attention_io_exponent(c);
  if (c.quantity == "radix_dfs_optimal_fraction")
    return radix_dfs_optimal_fraction(static_cast<int>(arg(c, "trials")), static_cast<int>(arg(c, "requests")),
                                      static_cast<int>(arg(c, "block_size")), static_cast<std::uint64_t>(arg(c, "seed")));
  if (c.quantity == "spec_expected_tokens")
    return spec_expected_tokens(arg(c, "alpha"), static_cast<int>(arg(c, "gamma")));
  if (c.quantity == "spec_speedup")
    return spec_speedup(arg(c, "alpha"), static_cast<int>(arg(c, "gamma")), arg(c, "c"));
  if (c.quantity == "spec_latency_reduction") {
    // Theorem 3.8 with c = the draft's cost over the target's per decode step; decode is bound
    // by reading the weights, so c = the presets' parameter ratio. 1 - 1 / speedup.
    const double cost = static_cast<double>(preset_config(name_arg(c, "draft")).parameter_count()) /
                        static_cast<double>(preset_config(name_arg(c, "target")).parameter_count());
    return 1.0 - 1.0 / spec_speedup(arg(c, "alpha"), static_cast<int>(arg(c, "gamma")), cost);
  }
  const ExperimentSpec spec = load_experiment(c.file, {});
  const ModelConfig model = experiment_model_config(spec.model);
  SimOptions so;
  so.kv_bytes = c.args.count("kv_bytes") ? static_cast<int>(arg(c, "kv_bytes")) : 2;
  if (c.quantity == "kv_bytes_per_token") return kv_bytes_per_token(model, so);
  if (c.quantity == "kv_slots") return arg(c, "kv_gib") * std::pow(2.0, 30) / kv_bytes_per_token(model, so);
  if (c.quantity == "sarathi_max_decodes")  // M_S: bf16 weights; m_kv: bf16 K and V of every layer
    return sarathi_max_decodes(arg(c, "gpu_gb") * 1e9, static_cast<double>(model.parameter_count()) * 2, arg(c, "max_seq_len"),
                               kv_bytes_per_token(model, so));
  if (c.quantity == "quant_decode_speedup") return quant_decode_speedup(c, spec, model);
  if (c.quantity == "ratio") {
    const SimRun& run = sim_run(c, spec, registry, model);
    const std::string metric = name_arg(c, "metric");
    // Optionally each side times a second metric (e2e_ms_mean × time_linear_frac: a request's
    // seconds in the linears).
    const auto times = c.names.find("times");
    const auto value = [&](const std::string& variant) {
      const double v = mean_metric(run.dir, variant, metric);
      return times == c.names.end() ? v : v * mean_metric(run.dir, variant, times->second);
    };
    return value(name_arg(c, "numerator")) / value(name_arg(c, "denominator"));
  }
  if (c.quantity == "difference") {
    const SimRun& run = sim_run(c, spec, registry, model);
    const std::string metric = name_arg(c, "metric");
    return mean_metric(run.dir, name_arg(c, "numerator"), metric) - mean_metric(run.dir, name_arg(c, "denominator"), metric);
  }
  if (c.quantity == "metric")
    return mean_metric(sim_run(c, spec, registry, model).dir, name_arg(c, "variant"), name_arg(c, "metric"));
  if (c.quantity == "spec_tokens_over_eq1") {
    // Tokens per target call (spec_tokens_per_step) of a variant simulated with Bernoulli(α)
    // acceptance, over Eq. 1 at that variant's own α (sim_accept_prob) and γ (num_draft).
    const SimRun& run = sim_run(c, spec, registry, model);
    const std::string variant = name_arg(c, "variant");
    for (const ResolvedVariant& v : run.plan.variants)
      if (v.name == variant) {
        if (v.stack.decoding.name != "speculative") throw Error(c.file + ": variant '" + variant + "' does not decode speculatively");
        const double alpha = v.decoding.get_float("sim_accept_prob");
        const int gamma = static_cast<int>(v.decoding.get_int("num_draft"));
        return mean_metric(run.dir, variant, "spec_tokens_per_step") / spec_expected_tokens(alpha, gamma);
      }
    throw Error(c.file + ": no variant '" + variant + "'");
  }
  if (c.quantity == "spec_speedup_over_theorem") {
    // Output throughput of a speculative variant (Bernoulli(α) acceptance, its draft's passes
    // charged by the draft's own shape) over the `denominator` variant's, divided by Theorem
    // 3.8's E / (γc + 1) with c = the draft's one-token step over the target's, both at batch 1
    // and `context` keys on the file's profile (bf16 weights: draft_quantization must be none).
    const SimRun& run = sim_run(c, spec, registry, model);
    const std::string variant = name_arg(c, "numerator");
    for (const ResolvedVariant& v : run.plan.variants)
      if (v.name == variant) {
        if (v.stack.decoding.name != "speculative") throw Error(c.file + ": variant '" + variant + "' does not decode speculatively");
        if (v.decoding.get_string("draft_quantization") != "none")
          throw Error(c.file + ": variant '" + variant + "': the theorem's c is taken with bf16 weights; allowed: draft_quantization = none");
        const double alpha = v.decoding.get_float("sim_accept_prob");
        const int gamma = static_cast<int>(v.decoding.get_int("num_draft"));
        const std::string draft_name = v.decoding.get_string("draft_model");
        ModelConfig draft = model;
        if (draft_name.empty()) {
          const int layers = static_cast<int>(v.decoding.get_int("draft_layers"));
          if (layers > 0) draft.n_layers = std::min(layers, model.n_layers);
        } else {
          draft = preset_config(draft_name);
        }
        SimOptions so = sim_options(spec.device, v.stack.attention.name, v.stack.quantization.name);
        const int context = static_cast<int>(arg(c, "context"));
        const double cost = sequence_step_cost(draft, so, 1, context).total() / sequence_step_cost(model, so, 1, context).total();
        const double theorem = spec_expected_tokens(alpha, gamma) / (gamma * cost + 1);
        const double measured = mean_metric(run.dir, variant, "throughput_out_tok_s") /
                                mean_metric(run.dir, name_arg(c, "denominator"), "throughput_out_tok_s");
        return measured / theorem;
      }
    throw Error(c.file + ": no variant '" + variant + "'");
  }
  if (c.quantity == "tp_speedup") return tp_speedup(c, registry);
  if (c.quantity == "capacity_ratio") {
    if (spec.device.kind != DeviceKind::kSim) throw Error(c.file + ": a capacity claim runs its experiment, which must be simulated");
    return capacity(c, registry, name_arg(c, "numerator")) / capacity(c, registry, name_arg(c, "denominator"));
  }
  throw Error(c.file + ": unknown claim quantity '" + c.quantity + "'; allowed: " + claim_quantity_names());
}

}  // namespace

std::vector<Claim> read_claims(const std::string& path, bool required) {
  const toml::table root = parse_toml_file(path, "an experiment or claims TOML file");
  std::vector<Claim> claims;
  const toml::node* n = root.get("claim");
  if (n == nullptr && !required) return claims;
  if (n == nullptr) throw Error(path + ": no [claim] or [[claim]] table");
  if (const auto* t = n->as_table()) claims.push_back(parse_claim(*t, path));
  else if (const auto* a = n->as_array())
    for (const auto& e : *a) {
      if (!e.is_table()) throw Error(path + ": [[claim]] entries must be tables");
      claims.push_back(parse_claim(*e.as_table(), path));
    }
  return claims;
}

ClaimUse claim_quantity_use(const std::string& quantity) {
  for (const auto& [name, use] : kClaimQuantities)
    if (quantity == name) return use;
  return ClaimUse::kUnknown;
}

ClaimResult check_claim(const Claim& claim, const Registry& registry) {
  ClaimResult r;
  r.claim = claim;
  if (claim.cls == "gpu") {
    r.verdict = "skipped (class gpu: needs a GPU device)";
    return r;
  }
  r.measured = measure(claim, registry);
  bool ok = false;
  if (claim.compare == "approx") ok = std::abs(r.measured - claim.expected) <= claim.tolerance * std::abs(claim.expected);
  else if (claim.compare == "greater") ok = r.measured > claim.expected;
  else ok = r.measured < claim.expected;
  r.verdict = ok ? "pass" : "FAIL";
  return r;
}

}  // namespace inferlab
