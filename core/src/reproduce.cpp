// Reading and checking published claims (see inferlab/reproduce.h, docs/reproductions.md).
#include "inferlab/reproduce.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>

#include <toml++/toml.h>

#include "inferlab/error.h"
#include "inferlab/experiment.h"
#include "inferlab/runner.h"
#include "inferlab/sim.h"

namespace inferlab {

namespace fs = std::filesystem;

double spec_expected_tokens(double alpha, int gamma) {
  if (alpha >= 1.0) return gamma + 1.0;
  return (1.0 - std::pow(alpha, gamma + 1)) / (1.0 - alpha);
}

double spec_speedup(double alpha, int gamma, double c) { return spec_expected_tokens(alpha, gamma) / (gamma * c + 1.0); }

namespace {

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

double measure(const Claim& c, const Registry& registry) {
  if (c.quantity == "spec_expected_tokens")
    return spec_expected_tokens(arg(c, "alpha"), static_cast<int>(arg(c, "gamma")));
  if (c.quantity == "spec_speedup")
    return spec_speedup(arg(c, "alpha"), static_cast<int>(arg(c, "gamma")), arg(c, "c"));
  const ExperimentSpec spec = load_experiment(c.file, {});
  const ModelConfig model = experiment_model_config(spec.model);
  SimOptions so;
  so.kv_bytes = c.args.count("kv_bytes") ? static_cast<int>(arg(c, "kv_bytes")) : 2;
  if (c.quantity == "kv_bytes_per_token") return kv_bytes_per_token(model, so);
  if (c.quantity == "kv_slots") return arg(c, "kv_gib") * std::pow(2.0, 30) / kv_bytes_per_token(model, so);
  if (c.quantity == "ratio") {
    if (spec.device.kind != "sim") throw Error(c.file + ": a ratio claim runs its experiment, which must be [device] kind = \"sim\"");
    const Plan plan = plan_experiment(spec, registry, model);
    RunOptions options;
    options.out_root = (fs::temp_directory_path() / ("inferlab-repro-" + std::to_string(::getpid()))).string();
    const RunOutcome out = run_plan(plan, registry, options);
    const std::string metric = name_arg(c, "metric");
    const double num = mean_metric(out.dir, name_arg(c, "numerator"), metric);
    const double den = mean_metric(out.dir, name_arg(c, "denominator"), metric);
    std::error_code ec;
    fs::remove_all(options.out_root, ec);
    return num / den;
  }
  throw Error(c.file + ": unknown claim quantity '" + c.quantity +
              "'; allowed: kv_bytes_per_token, kv_slots, spec_expected_tokens, spec_speedup, ratio");
}

}  // namespace

std::vector<Claim> read_claims(const std::string& path) {
  toml::table root;
  try {
    root = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    throw Error(path + ":" + std::to_string(e.source().begin.line) + ": " + std::string(e.description()));
  }
  std::vector<Claim> claims;
  const toml::node* n = root.get("claim");
  if (n == nullptr) throw Error(path + ": no [claim] or [[claim]] table");
  if (const auto* t = n->as_table()) claims.push_back(parse_claim(*t, path));
  else if (const auto* a = n->as_array())
    for (const auto& e : *a) {
      if (!e.is_table()) throw Error(path + ": [[claim]] entries must be tables");
      claims.push_back(parse_claim(*e.as_table(), path));
    }
  return claims;
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
