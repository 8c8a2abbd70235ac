// Writes one run's results into results/<experiment>/<UTC stamp>/: config.toml, manifest.json,
// metrics.csv, metrics.json, requests.csv, steps.csv, summary.md (the runner adds cells/, one file per
// finished cell). Files are rewritten (temp file + rename) after every variant × repeat, so a
// crash, a failing variant or an interrupt never loses the rows before it. A run directory is
// created fresh (runs never overwrite each other) or reopened by `run --resume`.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "inferlab/results/metrics.h"

namespace inferlab {

struct ResultRow {
  std::string variant;
  int repeat = 0;
  bool ok = true;
  std::string error;   // when !ok
  MetricRow metrics;   // empty when !ok
  double wall_s = 0;   // real time the run took
  std::uint64_t tokens_hash = 0;  // cell_tokens_hash over the requests' output hashes (ok rows)
};

struct RequestRow {
  std::string variant;
  int repeat = 0;
  RequestTimeline request;
};

struct StepRow {
  std::string variant;
  int repeat = 0;
  int step = 0;  // index in the cell's kept steps (sample_steps)
  StepTimeline timeline;
};

class ResultWriter {
 public:
  // Creates <out_root>/<experiment>/<stamp><suffix>[-N]/ (stamp = UTC YYYYMMDDTHHMMSSZ; a shard's
  // suffix is "-shard<i>of<n>"). Throws Error when the experiment name would put it anywhere
  // else ("..", ".", "a/b").
  ResultWriter(const std::string& out_root, const std::string& experiment, const std::string& suffix = "");
  // Writes into an existing run folder (resume); rows start empty.
  static ResultWriter reopen(const std::string& dir);
  const std::string& dir() const { return dir_; }

  void write_text(const std::string& file, const std::string& text) const;
  // Adds a row (kept in run order: repeat, then variant order) with its requests and its kept
  // steps, and rewrites metrics.csv, metrics.json, requests.csv, steps.csv and summary.md
  // (unless rewrite_files is false: the caller calls rewrite() once after many rows).
  void add(const ResultRow& row, const std::vector<RequestTimeline>& requests, bool rewrite_files = true,
           const std::vector<StepTimeline>& steps = {});
  // Title and description for summary.md; variant order (baseline first).
  void set_header(const std::string& title, const std::string& description,
                  const std::vector<std::string>& variants, const std::vector<std::string>& notes);
  // A paragraph under the summary's title saying the run is incomplete ("" = complete).
  void set_status(const std::string& status) { status_ = status; }
  const std::vector<ResultRow>& rows() const { return rows_; }
  // Rewrites the four result files.
  void rewrite() const;
  // steps.csv: one row per kept step of every cell, in run order.
  std::string steps_csv() const;
  // summary.md as rewrite() writes it, with `status` under the title instead of the set one.
  std::string summary(const std::string& status) const;

 private:
  ResultWriter() = default;
  std::string dir_;
  std::string title_, description_, status_;
  std::vector<std::string> variant_order_, notes_;
  std::vector<ResultRow> rows_;
  std::vector<RequestRow> requests_;
  std::vector<StepRow> steps_;
};

// Markdown summary: per variant, mean ± 95% CI over repeats and the ratio to the baseline.
std::string summary_markdown(const std::string& title, const std::string& description,
                             const std::vector<std::string>& variants, const std::vector<ResultRow>& rows,
                             const std::vector<std::string>& notes, const std::string& status = "");

// The metrics the summary's first table shows (when non-zero), in its column order.
const std::vector<std::string>& headline_metric_names();

// JSON string literal with escapes.
std::string json_quote(const std::string& s);
// FNV-1a 64-bit hash of a file's bytes as 16 hex digits ("" if unreadable).
std::string file_hash(const std::string& path);
std::string text_hash(const std::string& text);

}  // namespace inferlab
