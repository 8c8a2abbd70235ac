// The inferlab subcommands. Each takes the arguments after its name and returns the exit code;
// inferlab::Error escapes to main, which prints it on one line.
#pragma once
#include <memory>
#include <functional>
#include <string>
#include <vector>

#include <boost/program_options/options_description.hpp>
#include <boost/program_options/positional_options.hpp>
#include <boost/program_options/variables_map.hpp>

#include "inferlab/plugin/registry.h"
#include "inferlab/run/runner.h"

namespace inferlab::cli {

// Parses args against opts (+ positionals) and the common --help/--log; returns false after
// printing help.
bool parse_options(const std::vector<std::string>& args, const std::string& usage,
                   boost::program_options::options_description& opts,
                   const boost::program_options::positional_options_description* pos,
                   boost::program_options::variables_map& vm);

// An experiment FILE with --set and --repeats applied, checked against the plugins it names.
struct Loaded {
  ExperimentSpec spec;
  std::unique_ptr<Registry> registry;
  Plan plan;
};
Loaded load_and_plan(const boost::program_options::variables_map& vm);

int cmd_run(const std::vector<std::string>& args);
int cmd_validate(const std::vector<std::string>& args);
int cmd_plugins(const std::vector<std::string>& args);
int cmd_generate(const std::vector<std::string>& args);
int cmd_perplexity(const std::vector<std::string>& args);
int cmd_bench(const std::vector<std::string>& args);
int cmd_trace(const std::vector<std::string>& args);
int cmd_tokenize(const std::vector<std::string>& args);
int cmd_merge(const std::vector<std::string>& args);
int cmd_compare(const std::vector<std::string>& args);
int cmd_plot(const std::vector<std::string>& args);
int cmd_report(const std::vector<std::string>& args);
// The first python3 that imports matplotlib ("" when none).
std::string plot_python();
// Runs the plotting script on a results folder (its figure list to /dev/null when quiet).
void plot_run(const std::string& run, const std::string& python, const std::string& script, bool quiet);
// Draws each run's figures (when `plot` and matplotlib is there) and writes report.html of
// `runs` to `out`; returns `out`.
std::string write_run_report(const std::vector<std::string>& runs, const std::string& out, bool plot);
int cmd_reproduce(const std::vector<std::string>& args);
int cmd_submit(const std::vector<std::string>& args);
int cmd_calibrate(const std::vector<std::string>& args);
int cmd_export(const std::vector<std::string>& args);
int cmd_conformance(const std::vector<std::string>& args);
int cmd_kernels(const std::vector<std::string>& args);

// --model | --preset [--seed] [--n-layers] (bench, export: preset_model.cpp). The spec loads with
// load_experiment_model; display_name is the path or "<preset> (random weights, seed S)".
// Bad values throw Error naming `command` and the flag.
void add_preset_model_options(boost::program_options::options_description& o);
ModelSpec preset_model_spec(const boost::program_options::variables_map& vm, const std::string& command,
                            std::string& display_name);

// --clock wall|thread-cpu (run, calibrate): the steady clock, or the calling thread's CPU time,
// which needs a one-thread device ([device] threads = 1; Error otherwise).
std::function<double()> clock_option(const std::string& value, int threads);
// --calibration-cache DIR|none (run, calibrate): the folder of cached calibrations
// (default_calibration_cache() when absent; "" for none, which predicts and caches nothing).
std::string calibration_cache_option(const boost::program_options::variables_map& vm);

}  // namespace inferlab::cli
