// Writes one run's results into results/<experiment>/<UTC stamp>/: config.toml, manifest.json,
// metrics.csv, metrics.json, requests.csv, summary.md. Files are rewritten after every
// variant × repeat, so a crash or a failing variant never loses the rows before it. A run
// directory is created fresh: runs never overwrite each other.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "inferlab/metrics.h"

namespace inferlab {

struct ResultRow {
  std::string variant;
  int repeat = 0;
  bool ok = true;
  std::string error;   // when !ok
  MetricRow metrics;   // empty when !ok
  double wall_s = 0;   // real time the run took
};

struct RequestRow {
  std::string variant;
  int repeat = 0;
  RequestTimeline request;
};

class ResultWriter {
 public:
  // Creates <out_root>/<experiment>/<stamp>[-N]/ (stamp = UTC YYYYMMDDTHHMMSSZ).
  ResultWriter(const std::string& out_root, const std::string& experiment);
  const std::string& dir() const { return dir_; }

  void write_text(const std::string& file, const std::string& text) const;
  // Adds a row and rewrites metrics.csv, metrics.json, requests.csv and summary.md.
  void add(const ResultRow& row, const std::vector<RequestTimeline>& requests);
  // Title and description for summary.md; variant order (baseline first).
  void set_header(const std::string& title, const std::string& description,
                  const std::vector<std::string>& variants, const std::vector<std::string>& notes);
  const std::vector<ResultRow>& rows() const { return rows_; }

 private:
  void rewrite() const;
  std::string dir_;
  std::string title_, description_;
  std::vector<std::string> variant_order_, notes_;
  std::vector<ResultRow> rows_;
  std::vector<RequestRow> requests_;
};

// Markdown summary: per variant, mean ± 95% CI over repeats and the ratio to the baseline.
std::string summary_markdown(const std::string& title, const std::string& description,
                             const std::vector<std::string>& variants, const std::vector<ResultRow>& rows,
                             const std::vector<std::string>& notes);

// JSON string literal with escapes.
std::string json_quote(const std::string& s);
// FNV-1a 64-bit hash of a file's bytes as 16 hex digits ("" if unreadable).
std::string file_hash(const std::string& path);
std::string text_hash(const std::string& text);

}  // namespace inferlab
