// inferlab calibrate FILE [--out PATH]: time the real CPU executor of an experiment's stacks
// over a grid of steps and write the fitted cost model a simulation reads with
// [device] kind = "sim", profile = "calibrated:PATH" (docs/simulation.md).
#include <chrono>
#include <iostream>
#include <sstream>

#include <boost/program_options.hpp>

#include "commands.h"
#include "inferlab/error.h"
#include "inferlab/experiment/experiment.h"
#include "inferlab/results/prediction.h"
#include "inferlab/plugin/registry.h"
#include "inferlab/run/runner.h"
#include "inferlab/sim/sim_cost_model.h"

namespace po = boost::program_options;

namespace inferlab::cli {

namespace {
std::vector<int> int_list(const std::string& flag, const std::string& text) {
  std::vector<int> out;
  std::stringstream ss(text);
  for (std::string x; std::getline(ss, x, ',');) {
    std::size_t used = 0;
    int v = 0;
    try {
      v = std::stoi(x, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != x.size() || x.empty() || v < 1 || v > 1 << 20)
      throw Error("--" + flag + " '" + text + "': allowed: comma-separated integers 1 .. 1048576");
    out.push_back(v);
  }
  if (out.empty()) throw Error("--" + flag + " is empty; allowed: comma-separated integers");
  return out;
}
std::string joined(const std::vector<int>& v) {
  std::string s;
  for (int x : v) s += (s.empty() ? "" : ",") + std::to_string(x);
  return s;
}
}  // namespace

std::function<double()> clock_option(const std::string& value, int threads) {
  if (value == "wall")
    return [] { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); };
  if (value != "thread-cpu") throw Error("--clock " + value + "; allowed: wall, thread-cpu");
  if (threads != 1)
    throw Error("--clock thread-cpu times the calling thread only; the experiment's device must have one thread "
                "(--set device.threads=1), it has " + (threads == 0 ? std::string("all cores (0)") : std::to_string(threads)));
  return thread_cpu_seconds;
}

std::string calibration_cache_option(const po::variables_map& vm) {
  if (!vm.count("calibration-cache")) return default_calibration_cache();
  const std::string dir = vm["calibration-cache"].as<std::string>();
  if (dir.empty()) throw Error("--calibration-cache is empty; allowed: a folder, or none");
  return dir == "none" ? "" : dir;
}

int cmd_calibrate(const std::vector<std::string>& args) {
  const CalibrationGrid defaults;
  po::options_description o("calibrate options");
  o.add_options()("file", po::value<std::string>(), "experiment TOML (its model and variants' stacks)")(
      "set", po::value<std::vector<std::string>>()->composing(), "override a key: dotted.key=value (repeatable)")(
      "out", po::value<std::string>()->default_value("calibrated.toml"), "cost model file to write")(
      "prefill", po::value<std::string>()->default_value(joined(defaults.prefill_tokens)), "prefill lengths timed")(
      "batch", po::value<std::string>()->default_value(joined(defaults.decode_batch)), "decode batch sizes timed")(
      "context", po::value<std::string>()->default_value(joined(defaults.context)), "decode context lengths timed")(
      "repeats", po::value<int>()->default_value(defaults.repeats), "timings per grid point (median fitted), 1 .. 100")(
      "clock", po::value<std::string>()->default_value("wall"), "wall, or thread-cpu (one-thread devices: robust to load)")(
      "calibration-cache", po::value<std::string>(),
      "also keep the fit in this folder, where inferlab run finds it to predict (default ~/.cache/inferlab/calibration), or none");
  po::positional_options_description pos;
  pos.add("file", 1);
  po::variables_map vm;
  if (!parse_options(args, "usage: inferlab calibrate FILE [--set key=value]... [--out PATH] [--prefill N,..] "
                           "[--batch N,..] [--context N,..] [--repeats N] [--clock wall|thread-cpu]\n"
                           "                           [--calibration-cache DIR|none]",
                     o, &pos, vm))
    return 0;
  if (!vm.count("file")) throw Error("calibrate needs an experiment FILE (see inferlab calibrate --help)");
  CalibrationGrid grid;
  grid.prefill_tokens = int_list("prefill", vm["prefill"].as<std::string>());
  grid.decode_batch = int_list("batch", vm["batch"].as<std::string>());
  grid.context = int_list("context", vm["context"].as<std::string>());
  grid.repeats = vm["repeats"].as<int>();
  if (grid.repeats < 1 || grid.repeats > 100)
    throw Error("--repeats " + std::to_string(grid.repeats) + " is out of range; allowed: 1 .. 100");
  std::vector<std::string> sets;
  if (vm.count("set")) sets = vm["set"].as<std::vector<std::string>>();
  ExperimentSpec spec = load_experiment(vm["file"].as<std::string>(), sets);
  // A simulated file cannot set fuse (refused there): the CPU's default is what `run` times.
  if (spec.device.kind == DeviceKind::kSim) spec.device.fuse = fused_by_default(DeviceKind::kCpu);
  spec.device.kind = DeviceKind::kCpu;  // the stacks are timed on this CPU whatever the file simulates
  std::vector<std::string> plugin_path = spec.plugin_paths;
  for (const auto& d : Registry::default_search_path()) plugin_path.push_back(d);
  Registry registry(plugin_path);
  const Plan plan = plan_experiment(spec, registry, experiment_model_config(spec.model));
  const auto clock = clock_option(vm["clock"].as<std::string>(), spec.device.threads);
  CalibratedCostModel model = calibrate_plan(plan, registry, grid, clock);
  model.clock = vm["clock"].as<std::string>();
  const std::string out = vm["out"].as<std::string>();
  write_cost_model(out, model);
  std::cout << "| attention | quantization | grid points | fit rms relative error |\n|---|---|---|---|\n";
  for (const CalibratedStack& s : model.stacks)
    std::cout << "| " << s.attention << " | " << s.quantization << " | " << s.points << " | " << s.fit_rms_rel_error << " |\n";
  std::cout << "\nwrote " << out << " (use: [device] kind = \"sim\", profile = \"calibrated:" << out << "\")\n";
  // Cached per machine: every later `inferlab run` of this model, threads and clock here gets
  // pred_* columns from it (inferlab/results/prediction.h).
  if (const std::string cache = calibration_cache_option(vm); !cache.empty())
    std::cout << "cached " << store_calibration(cache, model) << " (inferlab run predicts with it)\n";
  return 0;
}

}  // namespace inferlab::cli
