// Sharding a run's variant × repeat grid over several processes or machines, and merging the
// shard folders back into the one results folder a local run would have written.
//
// Cell k = repeat * V + variant_index (V variants, baseline first) belongs to shard k mod n:
// every cell is in exactly one shard. A shard runs only its own cells (the quality baseline's
// reference log-probs are measured by every shard's parent before any cell, so kl_vs_baseline is
// right in every shard); its summary shows its own rows, with ratios only where the shard holds
// baseline rows. `inferlab merge` collects every shard's cells/ and writes the results exactly
// as the runner does (write_results_from_cells is shared by both).
#pragma once
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "inferlab/run/cell.h"
#include "inferlab/results/report.h"

namespace inferlab {

struct Shard {
  int index = 0;  // 0 .. count-1
  int count = 1;  // 1 = the whole grid
  bool owns(std::size_t variant_index, int repeat, std::size_t variants) const {
    return (static_cast<std::size_t>(repeat) * variants + variant_index) % static_cast<std::size_t>(count) ==
           static_cast<std::size_t>(index);
  }
};

// "i/n" with 0 <= i < n; throws Error naming what is allowed.
Shard parse_shard(const std::string& text);

// cells/r<rep>-v<vi>.cell
std::string cell_file_name(std::size_t variant_index, int repeat);

struct GridCell {
  std::size_t vi = 0;
  int rep = 0;
};
struct CellGrid {
  std::vector<std::pair<GridCell, CellResult>> done;  // run order: repeat, then variant
  std::vector<GridCell> missing;
};
// The cells of the grid `shard` owns, in run order: those whose file in `cells_dir` is complete
// and names the right variant and repeat are done, the rest missing (read = false: all missing).
CellGrid read_cells(const std::string& cells_dir, const std::vector<std::string>& variants, int repeats,
                    const Shard& shard, bool read = true);

// Adds every done cell's row and requests to `out` (run order) and rewrites the result files:
// how a run starts from a resumed folder's cells, and how merge writes its folder.
void write_results_from_cells(ResultWriter& out, const CellGrid& grid);

struct MergeOptions {
  std::vector<std::string> shard_dirs;
  std::string out_dir;         // created; must not exist or be empty
  bool allow_partial = false;  // merge even when cells are missing
};
struct MergeOutcome {
  std::string dir;
  std::size_t cells = 0, missing = 0, failed = 0;
  std::vector<std::string> report;  // one line per shard: index, status, cells, failures
  std::vector<bool> report_ok;      // per line: false for a shard not given, not complete, or with failed cells
};
// Throws Error for folders that are not shards of one run (config, commit, shard count, a shard
// given twice), and for missing cells or shards unless allow_partial.
MergeOutcome merge_shards(const MergeOptions& options);

}  // namespace inferlab
