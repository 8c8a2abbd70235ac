// Who owns a results folder and how every end of a run is marked in it (docs/results.md, "Who
// owns a results folder"): one process at a time holds the folder's lock (run.lock, flock), its
// writes go through temp file + rename with a disk-full error that says so, a crash of the run's
// own process still writes the folder's "failed" status, and a reader tells a status "running"
// whose process is gone from a live one.
#pragma once
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "inferlab/results/manifest.h"
#include "inferlab/results/report.h"

namespace inferlab {

// Writes `text` to `path` through `path.tmp` + rename, so readers never see half a file. A full
// disk (or quota) is an Error ending "no space left on device (N bytes free at DIR)"; another
// failure names the path and the system's reason. The temp file is removed on failure.
void write_file_atomically(const std::string& path, const std::string& text);
// "no space left on device (N bytes free at DIR)", DIR being the folder that holds `path`.
std::string no_space_message(const std::string& path);

// This machine's host name ("unknown" when it cannot be read).
std::string host_name();

// "pid N on host H since T" for the process holding DIR's lock, or "" when none does (the lock
// is free, or the folder has no run.lock: a folder of an older build).
std::string folder_lock_holder(const std::string& dir);

// A run's folder as a reader should see it. A folder whose manifest says "running" while no
// process holds its lock (killed by SIGKILL, a power cut, a node lost) reads "interrupted", with
// the pid and host that left it in `detail`.
struct FolderStatus {
  std::string status;  // complete, interrupted, failed, partial, running; "" without a manifest
  std::string detail;  // the signal, the failure's reason, or why a stale "running" reads interrupted
  std::size_t cells_done = 0, cells_total = 0;
  bool stale = false;  // the manifest said "running" and its process is gone
};
FolderStatus read_folder_status(const std::string& dir);
// "interrupted (SIGINT), 1 of 4 cells" — one line for messages.
std::string describe_status(const FolderStatus& s);

// Removes DIR's temp files (*.tmp in DIR and DIR/cells, the cells' scratch files cells/.*.child*)
// and its space reserve. Only the folder's lock holder may call it.
void remove_temp_files(const std::string& dir);

// The dotted keys (`experiment.seed`, `variant.1.attention`) whose values differ between two
// TOML texts, each as "key (old → new)" with values cut to 40 characters; a key present on one
// side only reads "(absent)" on the other. Empty when the texts mean the same.
std::vector<std::string> changed_config_keys(const std::string& before, const std::string& after);

// What a run holds on its folder while it lives: the lock (DIR/run.lock, flock, kept by the
// cells' child processes too, which die with the run), a reserve of disk space (DIR/.reserve)
// that a full disk cannot take from the final status, and handlers for SIGSEGV, SIGBUS, SIGFPE,
// SIGILL and SIGABRT that write the "failed" status armed by set_crash_texts before the process
// dies by the same signal. The handlers are process-wide: one RunFolder per process at a time
// (a run's; nested or concurrent ones would restore each other's handlers out of order).
class RunFolder {
 public:
  // Takes the lock, or throws Error naming the pid and host of the process that holds it.
  explicit RunFolder(const std::string& dir);
  ~RunFolder();  // restores the signal handlers, removes the reserve, releases the lock
  RunFolder(const RunFolder&) = delete;
  RunFolder& operator=(const RunFolder&) = delete;

  // manifest.json and summary.md as a crash now should leave them; "@SIGNAL@" in either stands
  // for the signal's name. Called after every state change, between cells.
  void set_crash_texts(const std::string& manifest, const std::string& summary);
  // Gives the reserve back (before the last status is written on a full disk).
  void free_reserve();

  static constexpr const char* kSignalPlaceholder = "@SIGNAL@";

 private:
  std::string dir_;
  int fd_ = -1;
};

// The summary's line under its title for a run in this state ("" when complete).
std::string status_line(const RunState& state, const std::string& dir);

// A new folder's config: its hash goes into state.config_hash (the manifest's run block) and a
// copy into DIR/cells/config.toml, from which a later edit's changed keys are named.
void record_folder_config(const std::string& dir, const std::string& config_text, RunState& state);
// A resumed folder's config.toml against the hash recorded at its creation: throws Error naming
// the changed keys unless `force`, which records the change in state.config_forced (and the
// copy) and returns a note for the summary. "" when unchanged; a folder of an older build (no
// hash) starts recording now.
std::string check_folder_config(const std::string& dir, RunState& state, bool force);

// The folder a run writes and where it stands. run_plan keeps it outside the run's own scope, so
// that a failure anywhere in the run still marks the folder.
struct RunIo {
  std::optional<ResultWriter> out;
  std::optional<RunFolder> folder;
  RunState state;
  std::string manifest;      // manifest.json (its run block is replaced by the state's)
  std::string crash_reason;  // the reason a crash writes; kSignalPlaceholder stands for the signal
  bool started = false;      // past the checks that leave a folder as they found it (lock, config)
  bool abandoned = false;    // removed: a run that could not start leaves no folder
  // Writes manifest.json with the state, sets the summary's status line, re-arms the crash marker.
  void write_state();
  // Marks the folder failed: frees the reserve, removes temp files, writes the manifest and the
  // summary with `reason` (best effort: a folder that cannot be written reads "interrupted"
  // once its lock is free).
  void mark_failed(const std::string& reason);
};

}  // namespace inferlab
