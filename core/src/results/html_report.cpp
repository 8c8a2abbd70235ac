#include "inferlab/results/html_report.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <sstream>

#include "inferlab/results/compare.h"
#include "inferlab/error.h"
#include "inferlab/results/metrics.h"
#include "inferlab/results/prediction.h"
#include "inferlab/results/report.h"
#include "inferlab/run/run_folder.h"

namespace inferlab {

namespace fs = std::filesystem;

namespace {

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string esc(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string fmt(double v) {
  if (!std::isfinite(v)) return "–";
  std::ostringstream os;
  const double a = std::fabs(v);
  if (a >= 1000) os << std::fixed << std::setprecision(0) << v;
  else if (a >= 1) os << std::fixed << std::setprecision(2) << v;
  else os << std::setprecision(3) << v;
  return os.str();
}

// data-v holds the number a column sorts by ("" sorts last).
std::string td(const std::string& text, double sort_value, const std::string& cls = "") {
  std::ostringstream os;
  os << "<td" << (cls.empty() ? "" : " class=\"" + cls + "\"");
  if (std::isfinite(sort_value)) os << " data-v=\"" << std::setprecision(17) << sort_value << "\"";
  os << ">" << text << "</td>";
  return os.str();
}

// "sig-up" / "sig-down" when Welch's test puts p < 0.05 (what compare flags), else "ns".
std::string significance_class(double ratio, double p) {
  if (!(p < 0.05) || !std::isfinite(ratio)) return "ns";
  return ratio > 1 ? "sig-up" : "sig-down";
}

std::string summary_table(const MetricTable& t) {
  std::vector<std::string> shown;
  for (const auto& m : headline_metric_names()) {
    bool nonzero = false;
    for (const auto& [v, ms] : t.values)
      if (auto it = ms.find(m); it != ms.end())
        for (double x : it->second) nonzero = nonzero || x != 0.0;
    if (nonzero) shown.push_back(m);
  }
  const std::string base = t.variants.empty() ? "" : t.variants.front();
  std::ostringstream h;
  h << "<table class=\"summary sortable\"><thead><tr><th>variant</th>";
  for (const auto& m : shown) h << "<th>" << esc(m) << "</th>";
  h << "</tr></thead><tbody>\n";
  for (std::size_t i = 0; i < t.variants.size(); ++i) {
    const std::string& v = t.variants[i];
    h << "<tr>" << td(esc(v), static_cast<double>(i));
    for (const auto& m : shown) {
      const auto vit = t.values.find(v);
      const std::vector<double> none;
      const auto& xs = vit != t.values.end() && vit->second.count(m) ? vit->second.at(m) : none;
      if (xs.empty()) {
        h << td("–", NAN);
        continue;
      }
      const auto [mean, half] = mean_ci95(xs);
      std::string text = fmt(mean) + (xs.size() > 1 ? " ± " + fmt(half) : "");
      if (v != base && t.values.count(base) && t.values.at(base).count(m)) {
        const auto& bs = t.values.at(base).at(m);
        const double bm = mean_ci95(bs).first;
        if (bm != 0) {
          const double ratio = mean / bm, p = welch_p_value(bs, xs);
          std::ostringstream r;
          r << std::fixed << std::setprecision(3) << ratio;
          text += " <span class=\"ratio " + significance_class(ratio, p) + "\" title=\"Welch p = " +
                  (std::isfinite(p) ? fmt(p) : std::string("untested (< 2 repeats)")) + "\">×" + r.str() + "</span>";
        }
      }
      h << td(text, mean);
    }
    h << "</tr>\n";
  }
  h << "</tbody></table>\n";
  return h.str();
}

// Per variant, measured and predicted (pred_* columns) with the relative error; a variant whose
// TPOT p50 prediction is off by more than kPredictionFlagError is flagged ("" without pred_*).
std::string prediction_table(const MetricTable& t) {
  const auto preds = summarize_predictions(t.variants, t.values);
  if (preds.empty()) return "";
  std::ostringstream h;
  h << "<h2>Predicted vs measured</h2>\n<p>Each cell replayed on this machine's calibrated simulator: measured, "
       "predicted (means over repeats) and the error of the means, predicted / measured − 1. <span class=\"pred-off\">Flagged</span> "
       "where the TPOT p50 prediction is off by more than "
    << fmt(kPredictionFlagError * 100) << " %.</p>\n<table class=\"prediction sortable\"><thead><tr><th>variant</th>";
  for (const char* m : kPredictedMetrics)
    h << "<th>" << m << " measured</th><th>predicted</th><th>error</th>";
  h << "<th>prediction</th></tr></thead><tbody>\n";
  for (std::size_t i = 0; i < preds.size(); ++i) {
    const VariantPrediction& vp = preds[i];
    h << "<tr" << (vp.flagged ? " class=\"pred-off\"" : "") << ">" << td(esc(vp.variant), static_cast<double>(i));
    for (const char* m : kPredictedMetrics) {
      const auto it = std::find_if(vp.metrics.begin(), vp.metrics.end(), [&](const PredictedMetric& p) { return p.metric == m; });
      if (it == vp.metrics.end()) {
        h << td("–", NAN) << td("–", NAN) << td("–", NAN);
        continue;
      }
      h << td(fmt(it->measured), it->measured) << td(fmt(it->predicted), it->predicted)
        << td(std::isfinite(it->error) ? (it->error >= 0 ? "+" : "") + fmt(it->error * 100) + " %" : "–", it->error);
    }
    h << td(vp.flagged ? "off (TPOT p50)" : "within bounds", NAN) << "</tr>\n";
  }
  h << "</tbody></table>\n";
  return h.str();
}

std::string figures(const fs::path& run, const std::string& note) {
  std::vector<fs::path> pngs;
  if (fs::is_directory(run / "figures"))
    for (const auto& e : fs::directory_iterator(run / "figures"))
      if (e.path().extension() == ".png") pngs.push_back(e.path());
  std::sort(pngs.begin(), pngs.end());
  if (pngs.empty()) return "<p class=\"note\">Figures unavailable" + (note.empty() ? std::string() : ": " + esc(note)) + ".</p>\n";
  std::ostringstream h;
  for (const auto& p : pngs)
    h << "<figure><img alt=\"" << esc(p.stem().string()) << "\" src=\"data:image/png;base64," << base64(read_all(p))
      << "\"><figcaption>" << esc(p.filename().string()) << "</figcaption></figure>\n";
  return h.str();
}

std::string comparison_table(const std::string& a, const std::string& b) {
  const auto rows = compare_runs(read_metric_table(a), read_metric_table(b), {});
  std::ostringstream h;
  h << "<h2>Comparison: " << esc(b) << " against " << esc(a) << "</h2>\n";
  if (rows.empty()) return h.str() + "<p class=\"note\">The runs share no variant.</p>\n";
  h << "<table class=\"comparison sortable\"><thead><tr><th>variant</th><th>metric</th><th>A</th><th>B</th>"
       "<th>B / A</th><th>Welch p</th></tr></thead><tbody>\n";
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const Comparison& c = rows[i];
    h << "<tr>" << td(esc(c.variant), static_cast<double>(i)) << td(esc(c.metric), NAN)
      << td(fmt(c.mean_a) + " ± " + fmt(c.half_a), c.mean_a) << td(fmt(c.mean_b) + " ± " + fmt(c.half_b), c.mean_b)
      << td("×" + fmt(c.ratio), c.ratio, "ratio " + std::string(c.flagged ? significance_class(c.ratio, 0) : "ns"))
      << td(fmt(c.p), c.p) << "</tr>\n";
  }
  h << "</tbody></table>\n";
  return h.str();
}

// Renders each manifest's key fields and plugin list; sorts a table by the clicked column.
constexpr const char* kScript = R"JS(
function cell(tr, i) { return tr.children[i]; }
document.querySelectorAll('table.sortable th').forEach(function (th, i) {
  th.addEventListener('click', function () {
    var table = th.closest('table'), body = table.tBodies[0];
    var col = Array.prototype.indexOf.call(th.parentNode.children, th);
    var dir = th.dataset.dir === 'asc' ? -1 : 1;
    th.dataset.dir = dir === 1 ? 'asc' : 'desc';
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = cell(a, col), y = cell(b, col);
      var vx = x.dataset.v, vy = y.dataset.v;
      if (vx === undefined && vy === undefined) return dir * x.textContent.localeCompare(y.textContent);
      if (vx === undefined) return 1;
      if (vy === undefined) return -1;
      return dir * (parseFloat(vx) - parseFloat(vy));
    });
    rows.forEach(function (r) { body.appendChild(r); });
  });
});
document.querySelectorAll('script.manifest').forEach(function (s) {
  var m = JSON.parse(s.textContent), out = document.getElementById(s.dataset.target);
  function row(k, v) {
    if (v === undefined || v === null || v === '') return;
    var tr = out.insertRow(), a = tr.insertCell(), b = tr.insertCell();
    a.textContent = k;
    b.textContent = typeof v === 'object' ? JSON.stringify(v) : String(v);
  }
  ['git_commit', 'git_dirty', 'compiler', 'cpu', 'cpu_isa', 'gpu', 'hardware_threads', 'threads', 'device', 'config_hash',
   'seed', 'repeats'].forEach(function (k) { row(k, m[k]); });
  if (m.model) row('model', [m.model.name, m.model.hash].filter(Boolean).join(' '));
  if (m.run) row('run status', m.run.status);
  (m.plugins || []).forEach(function (p) {
    row('plugin ' + p.kind + '/' + p.name, [p.version, p.hash, p.path].filter(Boolean).join(' '));
  });
});
)JS";

constexpr const char* kStyle = R"CSS(
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em auto; max-width: 1400px; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: right; }
th { background: #f0f0f0; cursor: pointer; }
td:first-child, table.manifest td { text-align: left; }
.ratio.sig-up { color: #b00; font-weight: bold; }
.ratio.sig-down { color: #070; font-weight: bold; }
.ratio.ns { color: #888; }
figure { display: inline-block; margin: 0.5em; }
figure img { max-width: 100%; border: 1px solid #ddd; }
.note { color: #a60; }
tr.pred-off td, span.pred-off { background: #fde2e2; color: #900; font-weight: bold; }
pre { background: #f7f7f7; padding: 0.5em; overflow: auto; }
)CSS";

}  // namespace

std::string base64(const std::string& bytes) {
  static const char* k = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (std::size_t i = 0; i < bytes.size(); i += 3) {
    const std::size_t n = std::min<std::size_t>(3, bytes.size() - i);
    std::uint32_t v = 0;
    for (std::size_t j = 0; j < 3; ++j)
      v = v << 8 | (j < n ? static_cast<unsigned char>(bytes[i + j]) : 0u);
    for (std::size_t j = 0; j < 4; ++j) out += j <= n ? k[(v >> (18 - 6 * j)) & 63] : '=';
  }
  return out;
}

std::string html_report(const std::vector<std::string>& runs, const std::string& figures_note) {
  if (runs.empty()) throw Error("report needs at least one results folder");
  std::ostringstream h;
  h << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
    << "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; img-src data:; "
       "style-src 'unsafe-inline'; script-src 'unsafe-inline'\">"
    << "<title>inferlab report</title><style>" << kStyle << "</style></head><body>\n";
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const fs::path run(runs[i]);
    const MetricTable table = read_metric_table(runs[i]);  // throws for a folder without metrics.csv
    std::string title = run.filename().string();
    const std::string summary = read_all(run / "summary.md");
    if (summary.rfind("# ", 0) == 0) title = summary.substr(2, summary.find('\n') - 2);
    const FolderStatus st = read_folder_status(runs[i]);
    h << "<section class=\"run\"><h1>" << esc(title) << "</h1>\n<p><code>" << esc(runs[i]) << "</code>"
      << (st.status.empty() ? "" : " · " + esc(describe_status(st))) << "</p>\n";
    h << "<h2>Summary</h2>\n<p>Mean ± 95% CI over repeats; ×r is the ratio to the baseline <code>"
      << esc(table.variants.empty() ? "" : table.variants.front())
      << "</code>, bold red (higher) or green (lower) where Welch's test gives p &lt; 0.05, grey otherwise. Click a "
         "column to sort.</p>\n"
      << summary_table(table) << prediction_table(table);
    h << "<h2>Figures</h2>\n" << figures(run, figures_note);
    const std::string manifest = read_all(run / "manifest.json");
    if (!manifest.empty()) {
      std::string safe;  // "</script>" inside a string would end the element
      for (char c : manifest) {
        if (c == '/' && !safe.empty() && safe.back() == '<') safe += '\\';  // "<\/": the same JSON string
        safe += c;
      }
      h << "<h2>Manifest</h2>\n<table class=\"manifest\" id=\"manifest-" << i << "\"></table>\n"
        << "<details><summary>manifest.json</summary><pre>" << esc(manifest) << "</pre></details>\n"
        << "<script type=\"application/json\" class=\"manifest\" data-target=\"manifest-" << i << "\">" << safe
        << "</script>\n";
    }
    h << "</section>\n";
  }
  for (std::size_t i = 1; i < runs.size(); ++i) h << comparison_table(runs[0], runs[i]);
  h << "<script>" << kScript << "</script>\n</body></html>\n";
  return h.str();
}

}  // namespace inferlab
