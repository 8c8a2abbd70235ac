#include "inferlab/results/report.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <set>
#include <sstream>

#include "inferlab/error.h"
#include "inferlab/results/prediction.h"
#include "inferlab/run/run_folder.h"
#include "tokenizer/utf8.h"

namespace inferlab {

namespace fs = std::filesystem;

std::string json_quote(const std::string& s) {
  std::string out = "\"";
  for (std::size_t i = 0; i < s.size();) {
    const auto ch = static_cast<unsigned char>(s[i]);
    const std::size_t n = utf8::sequence_length(s, i);
    if (n == 0) {  // invalid UTF-8 would make the file invalid JSON
      out += "\\ufffd";
      ++i;
      continue;
    }
    if (n > 1) {
      out.append(s, i, n);
      i += n;
      continue;
    }
    ++i;
    switch (ch) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (ch < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", ch);
          out += buf;
        } else {
          out += static_cast<char>(ch);
        }
    }
  }
  return out + "\"";
}

namespace {

std::uint64_t fnv1a(std::uint64_t h, const char* data, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    h ^= static_cast<unsigned char>(data[i]);
    h *= 0x100000001b3ull;
  }
  return h;
}

std::string hex64(std::uint64_t h) {
  std::ostringstream os;
  os << std::hex << std::setw(16) << std::setfill('0') << h;
  return os.str();
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string num(double v) {  // printf's %.8g (std::to_chars: no stream, no locale)
  if (std::isnan(v)) return "";
  char buf[32];
  const auto end = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::general, 8).ptr;
  return std::string(buf, end);
}

std::string json_num(double v) { return std::isfinite(v) ? num(v) : "null"; }

// Text safe inside a Markdown table cell: pipes escaped, newlines and backticks flattened.
std::string md_cell(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '|') out += "\\|";
    else if (c == '\n' || c == '\r') out += ' ';
    else if (c == '`') out += '\'';
    else out += c;
  }
  return out;
}

// Human formatting for the summary: 3 significant digits, thousands kept whole.
std::string pretty(double v) {
  if (std::isnan(v)) return "–";
  std::ostringstream os;
  double a = std::fabs(v);
  if (a >= 1000) os << std::fixed << std::setprecision(0) << v;
  else if (a >= 100) os << std::fixed << std::setprecision(1) << v;
  else if (a >= 1) os << std::fixed << std::setprecision(2) << v;
  else os << std::setprecision(3) << v;
  return os.str();
}

void write_file(const fs::path& p, const std::string& text) {
  write_file_atomically(p.string(), text);  // readers never see a half-written file
}

}  // namespace

std::string text_hash(const std::string& text) { return hex64(fnv1a(0xcbf29ce484222325ull, text.data(), text.size())); }

std::string file_hash(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  std::uint64_t h = 0xcbf29ce484222325ull;
  std::vector<char> buf(1 << 20);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    h = fnv1a(h, buf.data(), static_cast<std::size_t>(in.gcount()));
  }
  return hex64(h);
}

ResultWriter::ResultWriter(const std::string& out_root, const std::string& experiment, const std::string& suffix) {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &tm);
  const std::string name = stamp + suffix;
  fs::path base = fs::path(out_root) / experiment;
  // Every run folder is <out_root>/<experiment>/<stamp>: a name that is a path (".", "..",
  // "a/b") would put it elsewhere. Lexical, so a results root reached through a symlink is fine.
  const fs::path rel = (base / name).lexically_normal().lexically_relative(fs::path(out_root).lexically_normal());
  if (std::distance(rel.begin(), rel.end()) != 2 || *rel.begin() == ".." || *rel.begin() == ".")
    throw Error("experiment name '" + experiment + "' would put the results folder outside " + out_root +
                "/<experiment>/; allowed: letters, digits and - _ . + = (not . or ..)");
  std::error_code ec;
  fs::create_directories(base, ec);
  if (ec) throw Error("cannot create results folder " + base.string() + ": " + ec.message());
  for (int n = 0;; ++n) {
    fs::path d = base / (n == 0 ? name : name + "-" + std::to_string(n));
    if (fs::create_directory(d, ec)) {  // atomic: fails if it exists
      dir_ = d.string();
      break;
    }
    if (ec) throw Error("cannot create results folder " + d.string() + ": " + ec.message());
  }
}

ResultWriter ResultWriter::reopen(const std::string& dir) {
  if (!fs::is_directory(dir)) throw Error(dir + ": not a results folder");
  ResultWriter w;
  w.dir_ = dir;
  return w;
}

void ResultWriter::write_text(const std::string& file, const std::string& text) const {
  write_file(fs::path(dir_) / file, text);
}

void ResultWriter::set_header(const std::string& title, const std::string& description,
                              const std::vector<std::string>& variants, const std::vector<std::string>& notes) {
  title_ = title;
  description_ = description;
  variant_order_ = variants;
  notes_ = notes;
}

void ResultWriter::add(const ResultRow& row, const std::vector<RequestTimeline>& requests, bool rewrite_files,
                       const std::vector<StepTimeline>& steps) {
  // Run order whatever order cells finish in (a resumed run fills gaps).
  auto order = [this](const std::string& variant, int repeat) {
    const auto it = std::find(variant_order_.begin(), variant_order_.end(), variant);
    return std::make_pair(repeat, it - variant_order_.begin());
  };
  const auto key = order(row.variant, row.repeat);
  auto at = std::find_if(rows_.begin(), rows_.end(), [&](const ResultRow& r) { return order(r.variant, r.repeat) > key; });
  rows_.insert(at, row);
  auto rat = std::find_if(requests_.begin(), requests_.end(),
                          [&](const RequestRow& r) { return order(r.variant, r.repeat) > key; });
  std::vector<RequestRow> add;
  for (const auto& r : requests) add.push_back({row.variant, row.repeat, r});
  requests_.insert(rat, add.begin(), add.end());
  auto sat = std::find_if(steps_.begin(), steps_.end(), [&](const StepRow& r) { return order(r.variant, r.repeat) > key; });
  std::vector<StepRow> add_steps;
  for (std::size_t i = 0; i < steps.size(); ++i) add_steps.push_back({row.variant, row.repeat, static_cast<int>(i), steps[i]});
  steps_.insert(sat, add_steps.begin(), add_steps.end());
  if (rewrite_files) rewrite();
}

void ResultWriter::rewrite() const {
  // Column set: the standard names, then any extra ones rows carry (e.g. quality metrics).
  std::vector<std::string> cols = metric_names();
  std::set<std::string> have(cols.begin(), cols.end());
  for (const auto& r : rows_)
    for (const auto& [k, v] : r.metrics)
      if (have.insert(k).second) cols.push_back(k);

  std::ostringstream csv, json;
  csv << "variant,repeat,status,error,wall_s";
  for (const auto& c : cols) csv << "," << c;
  csv << ",tokens_hash\n";
  json << "[\n";
  for (std::size_t i = 0; i < rows_.size(); ++i) {
    const auto& r = rows_[i];
    std::map<std::string, double> m(r.metrics.begin(), r.metrics.end());
    csv << csv_field(r.variant) << "," << r.repeat << "," << (r.ok ? "ok" : "failed") << ","
        << csv_field(r.error) << "," << num(r.wall_s);
    json << "  {\"variant\": " << json_quote(r.variant) << ", \"repeat\": " << r.repeat
         << ", \"status\": \"" << (r.ok ? "ok" : "failed") << "\", \"error\": " << json_quote(r.error)
         << ", \"wall_s\": " << json_num(r.wall_s) << ", \"metrics\": {";
    bool first = true;
    for (const auto& c : cols) {
      auto it = m.find(c);
      csv << "," << (it == m.end() ? "" : num(it->second));
      if (it != m.end()) {
        json << (first ? "" : ", ") << json_quote(c) << ": " << json_num(it->second);
        first = false;
      }
    }
    const std::string hash = r.ok ? hex64(r.tokens_hash) : "";
    csv << "," << hash << "\n";
    json << "}, \"tokens_hash\": " << json_quote(hash) << "}" << (i + 1 < rows_.size() ? "," : "") << "\n";
  }
  json << "]\n";
  write_file(fs::path(dir_) / "metrics.csv", csv.str());
  write_file(fs::path(dir_) / "metrics.json", json.str());

  std::ostringstream req;
  req << "variant,repeat,request_id,arrival_s,first_token_s,finish_s,prompt_tokens,output_tokens,"
         "cached_prompt_tokens,preemptions,ttft_ms,e2e_ms,output_hash,status,first_scheduled_s\n";
  for (const auto& rr : requests_) {
    const auto& r = rr.request;
    bool done = r.finish_s >= 0;
    req << csv_field(rr.variant) << "," << rr.repeat << "," << r.id << "," << num(r.arrival_s) << ","
        << (r.first_token_s >= 0 ? num(r.first_token_s) : "") << "," << (done ? num(r.finish_s) : "") << ","
        << r.prompt_tokens << "," << r.output_tokens << "," << r.cached_prompt_tokens << "," << r.preemptions << ","
        << (r.first_token_s >= 0 ? num((r.first_token_s - r.arrival_s) * 1e3) : "") << ","
        << (done ? num((r.finish_s - r.arrival_s) * 1e3) : "") << "," << hex64(r.output_hash) << ","
        << (r.status != RequestStatus::kOk ? request_status_name(r.status) : done ? "finished" : "unfinished") << ","
        << (r.first_scheduled_s >= 0 ? num(r.first_scheduled_s) : "") << "\n";
  }
  write_file(fs::path(dir_) / "requests.csv", req.str());
  write_file(fs::path(dir_) / "steps.csv", steps_csv());
  write_file(fs::path(dir_) / "summary.md", summary(status_));
}

std::string ResultWriter::steps_csv() const {
  std::ostringstream csv;
  csv << "variant,repeat,step,start_s,duration_s,seqs,rows,prefill_tokens,decode_tokens,kv_blocks_reserved,"
         "kv_blocks_used,kv_blocks_free,kv_blocks_cached,kv_tokens,preemptions";
  for (int c = 0; c < kTimeCategories; ++c) csv << ",time_" << time_category_name(static_cast<TimeCategory>(c)) << "_s";
  csv << "\n";
  for (const auto& sr : steps_) {
    const StepTimeline& s = sr.timeline;
    csv << csv_field(sr.variant) << "," << sr.repeat << "," << sr.step << "," << num(s.start_s) << ","
        << num(s.duration_s) << "," << s.seqs << "," << s.rows << "," << s.prefill_tokens << "," << s.decode_tokens << ","
        << s.kv_blocks_reserved << "," << s.kv_blocks_used << "," << s.kv_blocks_free << "," << s.kv_blocks_cached << ","
        << s.kv_tokens << "," << s.preemptions;
    for (double t : s.time_s) csv << "," << num(t);
    csv << "\n";
  }
  return csv.str();
}

std::string ResultWriter::summary(const std::string& status) const {
  return summary_markdown(title_, description_, variant_order_, rows_, notes_, status);
}

const std::vector<std::string>& headline_metric_names() {
  static const std::vector<std::string> names = {"ttft_ms_p50", "tpot_ms_p50", "itl_ms_p99", "e2e_ms_p90",
                                             "throughput_out_tok_s", "goodput_req_s", "batch_mean",
                                             "kv_blocks_peak", "preemptions", "prefix_hit_frac",
                                             "spec_accept_frac", "weights_bytes", "perplexity", "kl_vs_baseline",
                                             "top1_agree_frac"};
  return names;
}

std::string summary_markdown(const std::string& title, const std::string& description,
                             const std::vector<std::string>& variants, const std::vector<ResultRow>& rows,
                             const std::vector<std::string>& notes, const std::string& status) {
  // metric -> variant -> values over repeats
  std::vector<std::string> cols = metric_names();
  std::set<std::string> have(cols.begin(), cols.end());
  std::map<std::string, std::map<std::string, std::vector<double>>> values;
  std::map<std::string, std::vector<std::string>> errors;
  for (const auto& r : rows) {
    if (!r.ok) {
      errors[r.variant].push_back("repeat " + std::to_string(r.repeat) + ": " + r.error);
      continue;
    }
    for (const auto& [k, v] : r.metrics) {
      if (have.insert(k).second) cols.push_back(k);
      if (!std::isnan(v)) values[k][r.variant].push_back(v);
    }
  }
  const std::string base = variants.empty() ? "" : variants.front();
  auto cell = [&](const std::string& metric, const std::string& variant, bool with_ratio) {
    auto& vs = values[metric][variant];
    if (vs.empty()) return std::string("–");
    auto [mean, half] = mean_ci95(vs);
    std::string s = pretty(mean);
    if (vs.size() > 1) s += " ± " + pretty(half);
    if (with_ratio && variant != base) {
      auto& bs = values[metric][base];
      if (!bs.empty()) {
        double bm = mean_ci95(bs).first;
        if (bm != 0) {
          std::ostringstream r;
          r << std::fixed << std::setprecision(mean / bm >= 10 ? 1 : 3) << mean / bm;
          s += " (×" + r.str() + ")";
        }
      }
    }
    return s;
  };

  std::ostringstream md;
  md << "# " << title << "\n\n";
  if (!status.empty()) md << "**" << status << "**\n\n";
  if (!description.empty()) md << description << "\n\n";
  std::size_t repeats = 0;
  for (const auto& r : rows) repeats = std::max<std::size_t>(repeats, static_cast<std::size_t>(r.repeat) + 1);
  md << "Mean ± 95% confidence half-width over " << repeats
     << " repeat(s); (×r) is the ratio to the baseline `" << base << "`.\n\n";

  const std::vector<std::string>& headline = headline_metric_names();
  // Headline columns that say something: present, and not zero for every variant.
  std::vector<std::string> shown;
  for (const auto& h : headline) {
    bool nonzero = false;
    for (const auto& [variant, vs] : values[h])
      for (double x : vs) nonzero = nonzero || x != 0.0;
    if (nonzero) shown.push_back(h);
  }
  md << "| variant |";
  for (const auto& h : shown) md << " " << h << " |";
  md << "\n|---|";
  for (std::size_t i = 0; i < shown.size(); ++i) md << "---|";
  md << "\n";
  for (const auto& v : variants) {
    md << "| " << md_cell(v) << (errors.count(v) ? " (failed)" : "") << " |";
    for (const auto& h : shown) md << " " << cell(h, v, true) << " |";
    md << "\n";
  }
  md << prediction_markdown(variants, rows);  // "" unless the rows carry pred_* columns
  if (!errors.empty()) {
    md << "\n## Failures\n\n";
    for (const auto& [v, es] : errors)
      for (const auto& e : es) md << "- " << md_cell(v) << ": " << md_cell(e) << "\n";
  }
  md << "\n## All metrics\n\n| metric |";
  for (const auto& v : variants) md << " " << md_cell(v) << " |";
  md << "\n|---|";
  for (std::size_t i = 0; i < variants.size(); ++i) md << "---|";
  md << "\n";
  for (const auto& c : cols) {
    if (!values.count(c)) continue;
    md << "| " << c << " |";
    for (const auto& v : variants) md << " " << cell(c, v, true) << " |";
    md << "\n";
  }
  // Output token hashes per variant and repeat: equal hashes mean identical tokens.
  std::map<std::string, std::string> hashes;
  for (const auto& r : rows)
    if (r.ok) hashes[r.variant] += (hashes[r.variant].empty() ? "" : ", ") + std::string("r") + std::to_string(r.repeat) + " `" + hex64(r.tokens_hash) + "`";
  if (!hashes.empty()) {
    md << "\n## Output token hashes\n\n";
    for (const auto& v : variants)
      if (hashes.count(v)) md << "- " << md_cell(v) << ": " << hashes[v] << "\n";
  }
  if (!notes.empty()) {
    md << "\n## Notes\n\n";
    for (const auto& n : notes) md << "- " << n << "\n";
  }
  return md.str();
}

}  // namespace inferlab
