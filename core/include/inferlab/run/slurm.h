// A sweep as a Slurm job array: one array task per shard (`inferlab run FILE --shard i/n`,
// shard.h) and a merge job that sbatch starts once every task has ended, failed or not
// (--dependency=afterany), so that `inferlab merge` reports a failed or missing shard instead of
// the merge waiting forever. Slurm does the scheduling; inferlab only writes the two batch
// scripts and submits them with `sbatch --parsable` (`inferlab submit FILE --slurm`).
//
// The submission folder <out>/<experiment>/<stamp>-slurm holds
//   array.sbatch, merge.sbatch   the scripts
//   logs/shard-<i>.{out,err}     each task's output; logs/merge.{out,err} the merge job's
//   shards/<experiment>/<stamp>-shard<i>of<n>   each shard's results folder
//   merged/                      the merged results folder, as a local run writes it
#pragma once
#include <optional>
#include <string>
#include <vector>

namespace inferlab {

struct SlurmSubmission {
  std::string inferlab;                 // absolute path of the binary the jobs run
  std::string experiment_file;          // absolute path of the experiment TOML
  std::vector<std::string> sets;        // --set key=value, passed to every shard
  std::optional<int> repeats;           // --repeats, passed to every shard
  std::string experiment_name;          // [experiment] name: the shards' folder name
  int shards = 1;                       // array tasks 0 .. shards-1
  std::string partition;                // "" = the cluster's default
  std::string time_limit;               // "" = the partition's default
  std::string workdir;                  // the submission folder (absolute)
  std::string chdir;                    // the jobs' working directory (absolute)
  std::string merged_dir() const { return workdir + "/merged"; }
};

// Throws Error naming what is allowed: partition a Slurm name list (letters, digits, _ . - ,),
// time one of Slurm's formats (M, M:S, H:M:S, D-H, D-H:M, D-H:M:S, or UNLIMITED), folders
// absolute and free of whitespace and quotes (#SBATCH lines take them unquoted), shards >= 1.
void check_slurm_submission(const SlurmSubmission& s);

// The job-array script: task i runs shard i/n into workdir/shards.
std::string slurm_array_script(const SlurmSubmission& s);
// The merge script: collects the shard folders (naming, with the end of its log, any shard that
// wrote none) and runs `inferlab merge` into merged_dir().
std::string slurm_merge_script(const SlurmSubmission& s);

// The job id in `sbatch --parsable` output ("1234" or "1234;cluster", then a newline); throws
// Error quoting the output when it holds none.
std::string parse_sbatch_job_id(const std::string& output);

// A word quoted for bash: 'it'\''s'.
std::string shell_quote(const std::string& word);

}  // namespace inferlab
