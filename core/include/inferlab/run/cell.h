// One variant × repeat of a run (a "cell"): its result, the file it is kept in
// (cells/r<repeat>-v<variant index>.cell in the results folder, which is also how a child
// process hands its result to the parent), and running it in a forked child so that a plugin
// that crashes, aborts, hangs or eats memory fails only its own cell.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "inferlab/results/metrics.h"
#include "inferlab/results/report.h"

namespace inferlab {

struct CellResult {
  ResultRow row;
  std::vector<RequestTimeline> requests;  // without token_times (metrics are computed already)
  std::vector<StepTimeline> steps;        // sample_steps of the engine's steps (steps.csv)
  // Failed by the run's own trouble, not the cell's (its child could not hand over a result):
  // kept as a failed row, and run again by `run --resume`.
  bool run_fault = false;
};

// FNV-1a over the token ids' 32-bit little-endian bytes: equal ids give equal hashes on every
// machine and backend (this is what requests.csv and metrics.csv record as hex).
std::uint64_t tokens_hash(std::span<const int> tokens);
// The hash of a whole cell: FNV-1a over its requests' output hashes, in request order.
std::uint64_t cell_tokens_hash(const std::vector<RequestTimeline>& requests);
std::string hash_hex(std::uint64_t h);

// The steps a cell keeps for steps.csv, bounded for long runs: all of them up to
// kStepsKeptWhole * 2; beyond, the first kStepsKeptWhole, then every k-th of the rest with
// k = ceil((n - kStepsKeptWhole) / kStepsKeptWhole), and always the last step (so at most
// 2 * kStepsKeptWhole + 1 rows per cell, evenly spread in step order).
inline constexpr std::size_t kStepsKeptWhole = 2000;
std::vector<StepTimeline> sample_steps(const std::vector<StepTimeline>& steps);

// Line-based text with an end marker; parse_cell returns nullopt for anything incomplete or
// malformed (a file cut short is a missing cell, never a wrong one).
std::string serialize_cell(const CellResult& cell);
std::optional<CellResult> parse_cell(const std::string& text);
// Written to a temp file and renamed into place: a reader sees all of it or nothing.
void write_cell_file(const std::string& path, const CellResult& cell);
std::optional<CellResult> read_cell_file(const std::string& path);

struct CellLimits {
  double timeout_s = 0;       // 0 = none; past it the child is killed (SIGKILL)
  std::int64_t memory_mb = 0;  // 0 = none; RLIMIT_AS = the address space at fork + this
};

// Runs `work` in a forked child and waits for it. The caller must hold no threads (fork
// copies only the calling one): create devices and thread pools inside `work`. The child
// restores the default SIGINT/SIGTERM actions, applies the memory limit, turns an exception
// into a failed row, writes its result to `scratch_path` and _exits. The parent polls every
// few milliseconds: when `stop()` turns true it kills the child and returns nullopt; a child
// killed by a signal, past the time limit, or gone without a result gives a failed row naming
// the signal or limit. `identity` supplies the variant and repeat of such rows. A child that
// could not write its result (its own failure, not the plugin's) gives a row marked run_fault,
// or throws Error when the disk is full. The child dies with the parent (PR_SET_PDEATHSIG).
std::optional<CellResult> run_cell_isolated(const std::function<CellResult()>& work, const CellLimits& limits,
                                            const std::string& scratch_path, const std::function<bool()>& stop,
                                            const ResultRow& identity);

// "SIGSEGV" for 11 and so on; "signal N" for one without a name.
std::string signal_name(int sig);

}  // namespace inferlab
