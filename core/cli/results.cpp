// Commands on results folders: compare two runs, plot one (merge lives beside run in commands.cpp).
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include <boost/program_options.hpp>

#include "commands.h"
#include "inferlab/results/compare.h"
#include "inferlab/error.h"
#include "inferlab/results/html_report.h"
#include "inferlab/support/log.h"
#include "inferlab/run/run_folder.h"

namespace po = boost::program_options;

namespace inferlab::cli {

int cmd_compare(const std::vector<std::string>& args) {
  po::options_description o("compare options");
  o.add_options()("runs", po::value<std::vector<std::string>>()->multitoken(), "RUN_A RUN_B")(
      "metric", po::value<std::vector<std::string>>()->composing(), "a metrics.csv column (repeatable; default: headline metrics)");
  po::positional_options_description pos;
  pos.add("runs", 2);
  po::variables_map vm;
  if (!parse_options(args, "usage: inferlab compare RUN_A RUN_B [--metric m]...", o, &pos, vm)) return 0;
  if (!vm.count("runs") || vm["runs"].as<std::vector<std::string>>().size() != 2)
    throw Error("compare needs two results folders: inferlab compare RUN_A RUN_B");
  const auto runs = vm["runs"].as<std::vector<std::string>>();
  std::vector<std::string> metrics;
  if (vm.count("metric")) metrics = vm["metric"].as<std::vector<std::string>>();
  const auto rows = compare_runs(read_metric_table(runs[0]), read_metric_table(runs[1]), metrics);
  if (rows.empty()) throw Error("compare: the two runs share no variant");
  // A run that did not finish is said so (a "running" one whose process is gone reads interrupted).
  auto status = [](const std::string& dir) {
    const FolderStatus s = read_folder_status(dir);
    return s.status.empty() || s.status == "complete" ? std::string() : describe_status(s);
  };
  std::cout << comparison_markdown(runs[0], runs[1], rows, status(runs[0]), status(runs[1])) << std::flush;
  return 0;
}

namespace {

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string default_plot_script() {
  if (const char* env = std::getenv("INFERLAB_PLOT_SCRIPT")) return env;
  return std::string(INFERLAB_SOURCE_DIR) + "/scripts/plot_run.py";
}

}  // namespace

std::string plot_python() {
  // The first Python that has matplotlib: $INFERLAB_PYTHON, python3 on PATH, Debian's.
  std::vector<std::string> candidates = {"python3", "/usr/bin/python3"};
  if (const char* env = std::getenv("INFERLAB_PYTHON")) candidates.insert(candidates.begin(), env);
  for (const auto& c : candidates)
    if (std::system((shell_quote(c) + " -c 'import matplotlib' >/dev/null 2>&1").c_str()) == 0) return c;
  return "";
}

void plot_run(const std::string& run, const std::string& python, const std::string& script, bool quiet) {
  if (!std::filesystem::exists(script)) throw Error(script + ": plotting script not found (pass --script FILE)");
  const int status = std::system((shell_quote(python) + " " + shell_quote(script) + " " + shell_quote(run) +
                                  (quiet ? " >/dev/null" : "")).c_str());
  if (status != 0) throw Error("plot: " + script + " failed (status " + std::to_string(status) + ")");
}

std::string write_run_report(const std::vector<std::string>& runs, const std::string& out, bool plot) {
  std::string note = "not drawn here (inferlab report RUN_DIR draws them)";
  const std::string python = plot ? plot_python() : "";  // the probe alone takes most of a second
  if (plot && python.empty()) note = "python3 with matplotlib not found (Debian: apt-get install python3-matplotlib)";
  for (const auto& run : runs) {
    if (!std::filesystem::exists(std::filesystem::path(run) / "metrics.csv"))
      throw Error(run + ": no metrics.csv; not a results folder of inferlab run");
    if (plot && !python.empty()) plot_run(run, python, default_plot_script(), true);
  }
  write_file_atomically(out, html_report(runs, note));
  return out;
}

int cmd_plot(const std::vector<std::string>& args) {
  po::options_description o("plot options");
  o.add_options()("run", po::value<std::string>(), "results folder")(
      "script", po::value<std::string>(), "plotting script (default: $INFERLAB_PLOT_SCRIPT, else the source tree's scripts/plot_run.py)");
  po::positional_options_description pos;
  pos.add("run", 1);
  po::variables_map vm;
  if (!parse_options(args, "usage: inferlab plot RUN_DIR", o, &pos, vm)) return 0;
  if (!vm.count("run")) throw Error("plot needs a results folder: inferlab plot RUN_DIR");
  const std::string run = vm["run"].as<std::string>();
  if (!std::filesystem::exists(std::filesystem::path(run) / "metrics.csv"))
    throw Error(run + ": no metrics.csv; not a results folder of inferlab run");
  const std::string script = vm.count("script") ? vm["script"].as<std::string>() : default_plot_script();
  if (!std::filesystem::exists(script)) throw Error(script + ": plotting script not found (pass --script FILE)");
  const std::string python = plot_python();
  if (python.empty())
    throw Error("plot needs python3 with matplotlib (Debian: apt-get install python3-matplotlib; scripts/setup.sh --test "
                "installs it; or set INFERLAB_PYTHON)");
  plot_run(run, python, script, false);
  return 0;
}

int cmd_report(const std::vector<std::string>& args) {
  po::options_description o("report options");
  o.add_options()("runs", po::value<std::vector<std::string>>()->multitoken(), "results folders")(
      "out", po::value<std::string>(), "the page (default: RUN/report.html for one run, ./report.html for several)")(
      "no-plot", po::bool_switch(), "embed the figures already in RUN/figures; draw none");
  po::positional_options_description pos;
  pos.add("runs", -1);
  po::variables_map vm;
  if (!parse_options(args, "usage: inferlab report RUN_DIR... [--out FILE] [--no-plot]", o, &pos, vm)) return 0;
  if (!vm.count("runs")) throw Error("report needs a results folder: inferlab report RUN_DIR [RUN_DIR...]");
  const auto runs = vm["runs"].as<std::vector<std::string>>();
  const std::string out = vm.count("out")       ? vm["out"].as<std::string>()
                          : runs.size() == 1 ? (std::filesystem::path(runs[0]) / "report.html").string()
                                             : std::string("report.html");
  std::cout << write_run_report(runs, out, !vm["no-plot"].as<bool>()) << "\n";
  return 0;
}

}  // namespace inferlab::cli
