// The Slurm job-array and merge scripts of `inferlab submit --slurm` (see slurm.h).
#include "inferlab/run/slurm.h"

#include <cctype>
#include <regex>
#include <sstream>

#include "inferlab/error.h"

namespace inferlab {

std::string shell_quote(const std::string& word) {
  std::string q = "'";
  for (char c : word) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

namespace {

// A path an #SBATCH line can carry unquoted.
void check_sbatch_path(const std::string& path, const std::string& what) {
  if (path.empty() || path.front() != '/') throw Error(what + " " + path + ": allowed: an absolute path");
  for (char c : path)
    if (std::isspace(static_cast<unsigned char>(c)) || c == '"' || c == '\'' || c == '%' || c == '\\')
      throw Error(what + " " + path +
                  ": allowed: a path without whitespace, quotes, % or \\ (#SBATCH lines carry it unquoted; "
                  "Slurm reads % as a pattern)");
}

// The #SBATCH lines both jobs share.
std::string common_directives(const SlurmSubmission& s) {
  std::string d = "#SBATCH --chdir=" + s.chdir + "\n#SBATCH --ntasks=1\n";
  if (!s.partition.empty()) d += "#SBATCH --partition=" + s.partition + "\n";
  if (!s.time_limit.empty()) d += "#SBATCH --time=" + s.time_limit + "\n";
  return d;
}

// The folder of shard $i (bash glob; nullglob makes a missing one an empty array).
std::string shard_glob(const SlurmSubmission& s, const std::string& index) {
  return shell_quote(s.workdir + "/shards/" + s.experiment_name + "/") + "*\"-shard" + index + "of" +
         std::to_string(s.shards) + "\"";
}

}  // namespace

void check_slurm_submission(const SlurmSubmission& s) {
  if (s.shards < 1) throw Error("--array-size " + std::to_string(s.shards) + ": allowed: 1 .. the number of cells");
  static const std::regex kPartition("[A-Za-z0-9_.-]+(,[A-Za-z0-9_.-]+)*");
  if (!s.partition.empty() && !std::regex_match(s.partition, kPartition))
    throw Error("--partition " + s.partition + ": allowed: Slurm partition names (letters, digits, _ . -), comma-separated");
  static const std::regex kTime("[0-9]+(:[0-9]+){0,2}|[0-9]+-[0-9]+(:[0-9]+){0,2}|UNLIMITED|INFINITE");
  if (!s.time_limit.empty() && !std::regex_match(s.time_limit, kTime))
    throw Error("--time " + s.time_limit +
                ": allowed: Slurm's formats M, M:S, H:M:S, D-H, D-H:M, D-H:M:S (e.g. 30, 1:30:00, 2-00) or UNLIMITED");
  check_sbatch_path(s.workdir, "--out");
  check_sbatch_path(s.chdir, "the working directory");
  for (char c : s.experiment_name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.')
      throw Error("[experiment] name " + s.experiment_name + ": allowed for a Slurm job name: letters, digits, _ - .");
}

std::string slurm_array_script(const SlurmSubmission& s) {
  check_slurm_submission(s);
  const std::string n = std::to_string(s.shards);
  std::ostringstream o;
  o << "#!/bin/bash\n"
    << "#SBATCH --job-name=inferlab-" << s.experiment_name << "\n"
    << "#SBATCH --array=0-" << s.shards - 1 << "\n"
    << "#SBATCH --output=" << s.workdir << "/logs/shard-%a.out\n"
    << "#SBATCH --error=" << s.workdir << "/logs/shard-%a.err\n"
    << common_directives(s)
    << "# inferlab submit --slurm: task i runs shard i/" << n << " of " << s.experiment_name
    << "'s variant x repeat cells;\n# the merge job (merge.sbatch) runs once every task has ended.\n"
    << "set -eu\n"
    << "exec " << shell_quote(s.inferlab) << " run " << shell_quote(s.experiment_file);
  for (const auto& kv : s.sets) o << " --set " << shell_quote(kv);
  if (s.repeats) o << " --repeats " << *s.repeats;
  o << " --shard \"$SLURM_ARRAY_TASK_ID/" << n << "\" --out " << shell_quote(s.workdir + "/shards") << "\n";
  return o.str();
}

std::string slurm_merge_script(const SlurmSubmission& s) {
  check_slurm_submission(s);
  const std::string n = std::to_string(s.shards);
  std::ostringstream o;
  o << "#!/bin/bash\n"
    << "#SBATCH --job-name=inferlab-" << s.experiment_name << "-merge\n"
    << "#SBATCH --output=" << s.workdir << "/logs/merge.out\n"
    << "#SBATCH --error=" << s.workdir << "/logs/merge.err\n"
    << common_directives(s)
    << "# inferlab submit --slurm: submitted with --dependency=afterany:<array job>, so it runs once\n"
    << "# every shard task has ended, failed or not; merge reports failed cells and refuses missing ones.\n"
    << "set -eu\n"
    << "shopt -s nullglob\n"
    << "dirs=()\n"
    << "for i in $(seq 0 " << s.shards - 1 << "); do\n"
    << "  d=(" << shard_glob(s, "${i}") << ")\n"
    << "  if [ ${#d[@]} -eq 0 ]; then\n"
    << "    echo \"inferlab merge job: shard $i/" << n << " wrote no results folder; the end of its log "
    << s.workdir << "/logs/shard-$i.err:\" >&2\n"
    << "    tail -n 20 " << shell_quote(s.workdir + "/logs/shard-") << "\"$i.err\" >&2 || true\n"
    << "  fi\n"
    << "  dirs+=(\"${d[@]}\")\n"
    << "done\n"
    << "if [ ${#dirs[@]} -eq 0 ]; then\n"
    << "  echo \"inferlab merge job: no shard wrote a results folder; nothing to merge\" >&2\n"
    << "  exit 1\n"
    << "fi\n"
    << "exec " << shell_quote(s.inferlab) << " merge \"${dirs[@]}\" --out " << shell_quote(s.merged_dir()) << "\n";
  return o.str();
}

std::string parse_sbatch_job_id(const std::string& output) {
  std::string first = output.substr(0, output.find('\n'));
  first = first.substr(0, first.find(';'));
  while (!first.empty() && std::isspace(static_cast<unsigned char>(first.back()))) first.pop_back();
  bool digits = !first.empty();
  for (char c : first) digits = digits && std::isdigit(static_cast<unsigned char>(c));
  if (!digits) throw Error("sbatch --parsable printed no job id: \"" + output + "\"");
  return first;
}

}  // namespace inferlab
