// Comparing two results folders (see compare.h).
#include "inferlab/results/compare.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <limits>
#include <sstream>

#include <boost/math/distributions/students_t.hpp>

#include "inferlab/error.h"
#include "inferlab/results/metrics.h"
#include "inferlab/results/report.h"

namespace inferlab {

namespace {

std::vector<std::string> csv_fields(const std::string& line) {
  std::vector<std::string> out;
  std::string f;
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') f += '"', ++i;
      else if (c == '"') quoted = false;
      else f += c;
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      out.push_back(f);
      f.clear();
    } else {
      f += c;
    }
  }
  out.push_back(f);
  return out;
}

std::string fixed(double v, int digits) {
  if (std::isnan(v)) return "–";
  std::ostringstream os;
  os << std::fixed << std::setprecision(digits) << v;
  return os.str();
}

std::string sig(double v) {
  if (std::isnan(v)) return "–";
  std::ostringstream os;
  os << std::setprecision(4) << v;
  return os.str();
}

// The distinct hashes of a variant's ok repeats, sorted, as "h1, h2".
std::string hash_set(const MetricTable& t, const std::string& variant, std::size_t& n) {
  const auto it = t.tokens_hash.find(variant);
  std::vector<std::string> h = it == t.tokens_hash.end() ? std::vector<std::string>{} : it->second;
  n = h.size();
  std::sort(h.begin(), h.end());
  h.erase(std::unique(h.begin(), h.end()), h.end());
  std::string joined;
  for (const auto& x : h) joined += (joined.empty() ? "" : ", ") + x;
  return joined;
}

Comparison compare_hashes(const MetricTable& a, const MetricTable& b, const std::string& variant) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Comparison c;
  c.variant = variant;
  c.metric = "tokens_hash";
  c.mean_a = c.half_a = c.mean_b = c.half_b = c.ratio = c.p = nan;
  c.hashes_a = hash_set(a, variant, c.n_a);
  c.hashes_b = hash_set(b, variant, c.n_b);
  c.flagged = c.n_a > 0 && c.n_b > 0 && c.hashes_a != c.hashes_b;
  return c;
}

}  // namespace

MetricTable read_metric_table(const std::string& run_dir) {
  const std::string path = (std::filesystem::path(run_dir) / "metrics.csv").string();
  std::ifstream in(path);
  if (!in) throw Error(path + ": cannot open; not a results folder of inferlab run");
  std::string line;
  if (!std::getline(in, line)) throw Error(path + ": empty");
  const auto header = csv_fields(line);
  const std::vector<std::string> fixed_cols = {"variant", "repeat", "status", "error", "wall_s"};
  if (header.size() < fixed_cols.size() + 1 || !std::equal(fixed_cols.begin(), fixed_cols.end(), header.begin()))
    throw Error(path + ": unexpected header; allowed: variant,repeat,status,error,wall_s,<metrics>...,tokens_hash");
  MetricTable t;
  for (std::size_t c = fixed_cols.size(); c < header.size(); ++c)
    if (header[c] != "tokens_hash") t.metrics.push_back(header[c]);
    else t.has_tokens_hash = true;
  for (int lineno = 2; std::getline(in, line); ++lineno) {
    if (line.empty()) continue;
    const auto f = csv_fields(line);
    if (f.size() != header.size())
      throw Error(path + ":" + std::to_string(lineno) + ": " + std::to_string(f.size()) + " fields, header has " +
                  std::to_string(header.size()));
    if (std::find(t.variants.begin(), t.variants.end(), f[0]) == t.variants.end()) t.variants.push_back(f[0]);
    if (f[2] != "ok") continue;
    for (std::size_t c = fixed_cols.size(); c < header.size(); ++c) {
      if (f[c].empty()) continue;
      if (header[c] == "tokens_hash") {
        t.tokens_hash[f[0]].push_back(f[c]);
        continue;
      }
      try {
        t.values[f[0]][header[c]].push_back(std::stod(f[c]));
      } catch (const std::exception&) {
        throw Error(path + ":" + std::to_string(lineno) + ": column " + header[c] + ": '" + f[c] + "' is not a number");
      }
    }
  }
  return t;
}

double welch_p_value(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() < 2 || b.size() < 2) return std::numeric_limits<double>::quiet_NaN();
  auto moments = [](const std::vector<double>& x) {
    double m = 0, ss = 0;
    for (double v : x) m += v;
    m /= static_cast<double>(x.size());
    for (double v : x) ss += (v - m) * (v - m);
    return std::make_pair(m, ss / static_cast<double>(x.size() - 1));
  };
  const auto [ma, va] = moments(a);
  const auto [mb, vb] = moments(b);
  const double na = static_cast<double>(a.size()), nb = static_cast<double>(b.size());
  const double sa = va / na, sb = vb / nb, se2 = sa + sb;
  if (se2 <= 0) return ma == mb ? 1.0 : 0.0;
  const double t = (mb - ma) / std::sqrt(se2);
  const double df = se2 * se2 / (sa * sa / (na - 1) + sb * sb / (nb - 1));
  boost::math::students_t_distribution<double> dist(df);
  return 2 * boost::math::cdf(boost::math::complement(dist, std::fabs(t)));
}

std::vector<Comparison> compare_runs(const MetricTable& a, const MetricTable& b, const std::vector<std::string>& metrics) {
  std::vector<std::string> chosen = metrics;
  if (chosen.empty())
    for (const auto& h : headline_metric_names()) {
      bool nonzero = false;
      for (const MetricTable* t : {&a, &b})
        for (const auto& [variant, m] : t->values)
          if (auto it = m.find(h); it != m.end())
            for (double x : it->second) nonzero = nonzero || x != 0.0;
      if (nonzero) chosen.push_back(h);
    }
  for (const auto& m : chosen) {
    if (m == "tokens_hash" ? !a.has_tokens_hash && !b.has_tokens_hash
                           : std::find(a.metrics.begin(), a.metrics.end(), m) == a.metrics.end() &&
                                 std::find(b.metrics.begin(), b.metrics.end(), m) == b.metrics.end())
      throw Error("--metric " + m + ": neither run records it");
  }
  std::vector<Comparison> out;
  static const std::vector<double> kNone;
  auto get = [](const MetricTable& t, const std::string& v, const std::string& m) -> const std::vector<double>& {
    auto vi = t.values.find(v);
    if (vi == t.values.end()) return kNone;
    auto mi = vi->second.find(m);
    return mi == vi->second.end() ? kNone : mi->second;
  };
  for (const auto& v : a.variants) {
    if (std::find(b.variants.begin(), b.variants.end(), v) == b.variants.end()) continue;
    for (const auto& m : chosen) {
      if (m == "tokens_hash") {
        out.push_back(compare_hashes(a, b, v));
        continue;
      }
      const auto& xa = get(a, v, m);
      const auto& xb = get(b, v, m);
      Comparison c;
      c.variant = v;
      c.metric = m;
      c.n_a = xa.size();
      c.n_b = xb.size();
      const double nan = std::numeric_limits<double>::quiet_NaN();
      std::tie(c.mean_a, c.half_a) = xa.empty() ? std::make_pair(nan, nan) : mean_ci95(xa);
      std::tie(c.mean_b, c.half_b) = xb.empty() ? std::make_pair(nan, nan) : mean_ci95(xb);
      c.ratio = c.mean_a != 0 ? c.mean_b / c.mean_a : nan;
      c.p = welch_p_value(xa, xb);
      c.flagged = !std::isnan(c.p) && c.p < 0.05;
      out.push_back(c);
    }
  }
  return out;
}

std::string comparison_markdown(const std::string& run_a, const std::string& run_b, const std::vector<Comparison>& rows,
                                const std::string& status_a, const std::string& status_b) {
  std::ostringstream md;
  md << "# compare\n\nA: `" << run_a << "`" << (status_a.empty() ? "" : " — " + status_a) << "\nB: `" << run_b << "`"
     << (status_b.empty() ? "" : " — " + status_b) << "\n\n"
     << "Mean ± 95% CI half-width over ok repeats (n); ratio = B/A; p = two-sided Welch t-test (both runs need >= 2 "
        "repeats); **changed** when p < 0.05.\n\n"
     << "| variant | metric | A (n) | B (n) | B/A | p | |\n|---|---|---|---|---|---|---|\n";
  std::size_t flagged = 0;
  for (const auto& c : rows) {
    flagged += c.flagged;
    auto side = [&](double mean, double half, const std::string& hashes) {
      if (c.metric == "tokens_hash") return hashes.empty() ? std::string("–") : "`" + hashes + "`";
      return sig(mean) + " ± " + sig(half);
    };
    md << "| " << c.variant << " | " << c.metric << " | " << side(c.mean_a, c.half_a, c.hashes_a) << " (" << c.n_a
       << ") | " << side(c.mean_b, c.half_b, c.hashes_b) << " (" << c.n_b << ") | " << fixed(c.ratio, 3) << " | "
       << (std::isnan(c.p) ? std::string("–") : sig(c.p)) << " | " << (c.flagged ? "**changed**" : "") << " |\n";
  }
  md << "\n" << flagged << " change(s) flagged of " << rows.size() << " comparison(s).\n";
  return md.str();
}

}  // namespace inferlab
