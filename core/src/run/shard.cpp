// Sharded runs and `inferlab merge` (see shard.h).
#include "inferlab/run/shard.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include "inferlab/experiment/tomlpp.h"

#include "formats/json.h"
#include "inferlab/error.h"
#include "inferlab/results/manifest.h"
#include "inferlab/results/report.h"
#include "inferlab/run/run_folder.h"

namespace inferlab {

namespace fs = std::filesystem;
namespace json = formats::json;
using formats::json_int_at;
using formats::json_text_at;

Shard parse_shard(const std::string& text) {
  const auto slash = text.find('/');
  Shard s;
  try {
    if (slash == std::string::npos) throw std::invalid_argument("no slash");
    std::size_t a = 0, b = 0;
    s.index = std::stoi(text.substr(0, slash), &a);
    s.count = std::stoi(text.substr(slash + 1), &b);
    if (a != slash || b != text.size() - slash - 1) throw std::invalid_argument("trailing");
  } catch (const std::exception&) {
    throw Error("--shard " + text + ": allowed: i/n with 0 <= i < n (e.g. 0/3, 1/3, 2/3)");
  }
  if (s.count < 1 || s.index < 0 || s.index >= s.count)
    throw Error("--shard " + text + ": allowed: i/n with 0 <= i < n (e.g. 0/3, 1/3, 2/3)");
  return s;
}

std::string cell_file_name(std::size_t variant_index, int repeat) {
  return "r" + std::to_string(repeat) + "-v" + std::to_string(variant_index) + ".cell";
}

CellGrid read_cells(const std::string& cells_dir, const std::vector<std::string>& variants, int repeats,
                    const Shard& shard, bool read) {
  CellGrid grid;
  for (int rep = 0; rep < repeats; ++rep)
    for (std::size_t vi = 0; vi < variants.size(); ++vi) {
      if (!shard.owns(vi, rep, variants.size())) continue;
      auto c = read ? read_cell_file((fs::path(cells_dir) / cell_file_name(vi, rep)).string()) : std::nullopt;
      // A cell failed by its run's own trouble (not the plugin's) is run again.
      if (c && c->row.variant == variants[vi] && c->row.repeat == rep && !c->run_fault)
        grid.done.push_back({{vi, rep}, std::move(*c)});
      else grid.missing.push_back({vi, rep});
    }
  return grid;
}

namespace {

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// One shard folder as merge sees it.
struct ShardFolder {
  std::string dir, manifest_text, config_text;
  json::value manifest;
  Shard shard;
  std::vector<std::string> notes;  // summary.md's "## Notes" items
};

ShardFolder read_shard_folder(const std::string& dir) {
  ShardFolder f;
  f.dir = dir;
  if (!fs::exists(fs::path(dir) / "manifest.json") || !fs::exists(fs::path(dir) / "config.toml"))
    throw Error(dir + ": no manifest.json or config.toml; not a results folder of inferlab run");
  f.manifest_text = slurp(fs::path(dir) / "manifest.json");
  f.config_text = slurp(fs::path(dir) / "config.toml");
  f.manifest = formats::parse_json(f.manifest_text, dir + "/manifest.json");
  f.shard.index = static_cast<int>(json_int_at(f.manifest, "run.shard.index", 0));
  f.shard.count = static_cast<int>(json_int_at(f.manifest, "run.shard.count", 1));
  std::istringstream md(slurp(fs::path(dir) / "summary.md"));
  bool in_notes = false;
  for (std::string line; std::getline(md, line);) {
    if (line.rfind("## ", 0) == 0) in_notes = line == "## Notes";
    else if (in_notes && line.rfind("- ", 0) == 0) f.notes.push_back(line.substr(2));
  }
  return f;
}

// The first folder's value of `key` must be every folder's; else a clear error.
void require_same(const std::vector<ShardFolder>& shards, const std::string& what,
                  const std::function<std::string(const ShardFolder&)>& value) {
  for (const auto& s : shards)
    if (value(s) != value(shards.front()))
      throw Error("merge: " + shards.front().dir + " and " + s.dir + " differ in " + what + " (" + value(shards.front()) +
                  " vs " + value(s) + "); only shards of one run can be merged");
}

}  // namespace

MergeOutcome merge_shards(const MergeOptions& options) {
  if (options.shard_dirs.empty()) throw Error("merge: no shard folders given");
  std::vector<ShardFolder> shards;
  for (const auto& d : options.shard_dirs) shards.push_back(read_shard_folder(d));
  require_same(shards, "config hash", [](const ShardFolder& s) { return json_text_at(s.manifest, "config_hash", ""); });
  require_same(shards, "resolved config.toml", [](const ShardFolder& s) { return text_hash(s.config_text); });
  require_same(shards, "git commit", [](const ShardFolder& s) { return json_text_at(s.manifest, "git_commit", ""); });
  require_same(shards, "shard count", [](const ShardFolder& s) { return std::to_string(s.shard.count); });
  std::map<int, const ShardFolder*> by_index;
  for (const auto& s : shards)
    if (!by_index.emplace(s.shard.index, &s).second)
      throw Error("merge: " + by_index[s.shard.index]->dir + " and " + s.dir + " are both shard " +
                  std::to_string(s.shard.index) + "/" + std::to_string(s.shard.count));
  const int count = shards.front().shard.count;

  std::vector<std::string> names;
  const json::value* stacks = formats::json_find(shards.front().manifest, "stacks");
  if (!stacks || !stacks->is_array())
    throw Error("merge: " + shards.front().dir + "/manifest.json has no \"stacks\" list; not a manifest of inferlab run");
  for (const json::value& v : stacks->get_array()) names.push_back(json_text_at(v, "variant", ""));
  const int repeats = static_cast<int>(json_int_at(shards.front().manifest, "repeats", 1));

  MergeOutcome outcome;
  CellGrid all;
  RunState state;
  std::vector<std::string> notes;
  std::ostringstream sources;
  sources << "[";
  for (int i = 0; i < count; ++i) {
    const auto it = by_index.find(i);
    if (it == by_index.end()) {
      outcome.report.push_back("shard " + std::to_string(i) + "/" + std::to_string(count) + ": not given");
      outcome.report_ok.push_back(false);
      CellGrid g = read_cells("", names, repeats, Shard{i, count}, false);
      all.missing.insert(all.missing.end(), g.missing.begin(), g.missing.end());
      continue;
    }
    const ShardFolder& s = *it->second;
    CellGrid g = read_cells((fs::path(s.dir) / "cells").string(), names, repeats, s.shard);
    std::size_t failed = 0;
    std::string errors;  // the first failed cells with their errors, as the shard recorded them
    for (const auto& [cell, c] : g.done) {
      if (c.row.ok) continue;
      if (++failed <= 3) errors += (failed > 1 ? "; " : ": ") + names[cell.vi] + " repeat " + std::to_string(cell.rep) + ": " + c.row.error;
      else if (failed == 4) errors += "; …";
    }
    const std::string status = read_folder_status(s.dir).status;  // a stale "running" reads interrupted
    outcome.report.push_back("shard " + std::to_string(i) + "/" + std::to_string(count) + " (" + s.dir + "): " + status +
                             ", " + std::to_string(g.done.size()) + " of " + std::to_string(g.done.size() + g.missing.size()) +
                             " cells" + (failed ? ", " + std::to_string(failed) + " failed" + errors : ""));
    outcome.report_ok.push_back(status == "complete" && failed == 0 && g.missing.empty());
    sources << (i ? ", " : "") << "\n    {\"dir\": " << json_quote(fs::absolute(s.dir).string()) << ", \"index\": " << i
            << ", \"count\": " << count << ", \"status\": " << json_quote(status)
            << ", \"git_commit\": " << json_quote(json_text_at(s.manifest, "git_commit", ""))
            << ", \"git_dirty\": " << (json_text_at(s.manifest, "git_dirty", "false") == "true" ? "true" : "false")
            << ", \"cpu\": " << json_quote(json_text_at(s.manifest, "cpu", ""))
            << ", \"cpu_isa\": " << json_quote(json_text_at(s.manifest, "cpu_isa", ""))
            << ", \"hardware_threads\": " << json_int_at(s.manifest, "hardware_threads", 0)
            << ", \"threads\": " << json_int_at(s.manifest, "threads", 0) << ", \"cells_done\": " << g.done.size()
            << ", \"cells_failed\": " << failed << ", \"resumes\": " << json_int_at(s.manifest, "run.resumes", 0) << "}";
    if (const json::value* det = formats::json_find_path(s.manifest, "run.determinism"); det && det->is_object())
      for (const auto& verdict : det->get_object())
        state.determinism.emplace_back(std::string(verdict.key()), json_text_at(verdict.value(), "", ""));
    for (const auto& n : s.notes)
      if (n.rfind("shard ", 0) != 0 && std::find(notes.begin(), notes.end(), n) == notes.end()) notes.push_back(n);
    for (auto& d : g.done) all.done.push_back(std::move(d));
    all.missing.insert(all.missing.end(), g.missing.begin(), g.missing.end());
  }
  sources << "\n  ]";
  // Run order (repeat, then variant), as a local run lists them.
  auto run_order = [](const GridCell& x, const GridCell& y) { return std::tie(x.rep, x.vi) < std::tie(y.rep, y.vi); };
  std::sort(all.done.begin(), all.done.end(), [&](const auto& x, const auto& y) { return run_order(x.first, y.first); });
  std::sort(all.missing.begin(), all.missing.end(), run_order);
  if (!all.missing.empty() && !options.allow_partial) {
    std::string which;
    for (std::size_t i = 0; i < all.missing.size() && i < 8; ++i)
      which += (i ? ", " : "") + names[all.missing[i].vi] + " repeat " + std::to_string(all.missing[i].rep);
    if (all.missing.size() > 8) which += ", …";
    std::string report;
    for (const auto& r : outcome.report) report += "\n  " + r;
    throw Error("merge: " + std::to_string(all.missing.size()) + " cell(s) missing (" + which +
                "); finish the shards (inferlab run --resume SHARD_DIR) or pass --allow-partial" + report);
  }

  // The merged folder: written exactly as a local run writes its results.
  if (fs::exists(options.out_dir) && !fs::is_empty(options.out_dir))
    throw Error("merge: --out " + options.out_dir + " exists and is not empty");
  fs::create_directories(fs::path(options.out_dir) / "cells");
  ResultWriter out = ResultWriter::reopen(options.out_dir);
  out.write_text("config.toml", shards.front().config_text);
  std::string description;
  try {
    description = toml::parse(shards.front().config_text)["experiment"]["description"].value_or(std::string());
  } catch (const std::exception&) {
  }
  notes.push_back("merged from " + std::to_string(shards.size()) + " of " + std::to_string(count) + " shard(s)");
  out.set_header(json_text_at(shards.front().manifest, "experiment", ""), description, names, notes);
  for (const auto& [cell, c] : all.done) {
    write_cell_file((fs::path(options.out_dir) / "cells" / cell_file_name(cell.vi, cell.rep)).string(), c);
    state.done.push_back({names[cell.vi], cell.rep});
    outcome.failed += !c.row.ok;
  }
  for (const auto& m : all.missing) state.missing.push_back({names[m.vi], m.rep});
  state.status = all.missing.empty() ? "complete" : "partial";
  state.merged_from = sources.str();
  out.write_text("manifest.json", manifest_with_state(shards.front().manifest_text, state));
  if (!all.missing.empty())
    out.set_status("Partial merge: " + std::to_string(all.done.size()) + " of " +
                   std::to_string(all.done.size() + all.missing.size()) + " cells (--allow-partial).");
  write_results_from_cells(out, all);
  outcome.dir = options.out_dir;
  outcome.cells = all.done.size();
  outcome.missing = all.missing.size();
  return outcome;
}

void write_results_from_cells(ResultWriter& out, const CellGrid& grid) {
  for (const auto& [cell, c] : grid.done) out.add(c.row, c.requests, false, c.steps);
  out.rewrite();
}

}  // namespace inferlab
