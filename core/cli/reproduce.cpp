// inferlab reproduce [--class C] [FILE...]: check published claims (experiments/repro/*.toml).
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>

#include <boost/program_options.hpp>

#include "commands.h"
#include "inferlab/error.h"
#include "inferlab/experiment/input_checks.h"
#include "inferlab/repro/reproduce.h"

namespace po = boost::program_options;

namespace inferlab::cli {

int cmd_reproduce(const std::vector<std::string>& args) {
  po::options_description opts("reproduce options");
  opts.add_options()("class", po::value<std::string>(), "only claims of this class: exact, cpu, gpu")(
      "file", po::value<std::vector<std::string>>(), "claim files (default: experiments/repro/*.toml)");
  po::positional_options_description pos;
  pos.add("file", -1);
  po::variables_map vm;
  if (!parse_options(args, "usage: inferlab reproduce [--class exact|cpu|gpu] [FILE...]", opts, &pos, vm)) return 0;
  const std::string only = vm.count("class") ? vm["class"].as<std::string>() : "";
  if (!only.empty() && only != "exact" && only != "cpu" && only != "gpu")
    throw Error("--class " + quote_input(only) + " is not a claim class; allowed: exact, cpu, gpu");
  std::vector<std::string> files;
  if (vm.count("file")) files = vm["file"].as<std::vector<std::string>>();
  if (files.empty()) {
    const std::filesystem::path dir = "experiments/repro";
    if (!std::filesystem::is_directory(dir)) throw Error("no claim files given and no experiments/repro/ here");
    for (const auto& e : std::filesystem::directory_iterator(dir))
      if (e.path().extension() == ".toml") files.push_back(e.path().string());
    std::sort(files.begin(), files.end());
  }
  Registry registry(Registry::default_search_path());
  int checked = 0;
  std::map<std::string, int> failed;  // by class
  std::cout << "| file | claim | source | class | expected | measured | verdict |\n|---|---|---|---|---|---|---|\n";
  for (const auto& f : files)
    for (const Claim& c : read_claims(f)) {
      if (!only.empty() && c.cls != only) continue;
      const ClaimResult r = check_claim(c, registry);
      char expected[64], measured[64];
      std::snprintf(expected, sizeof expected, "%s%.6g%s", c.compare == "greater" ? "> " : c.compare == "less" ? "< " : "",
                    c.expected, c.compare == "approx" && c.tolerance > 0 ? (" ±" + std::to_string(c.tolerance * 100).substr(0, 4) + "%").c_str() : "");
      std::snprintf(measured, sizeof measured, "%.6g", r.measured);
      std::cout << "| " << std::filesystem::path(f).filename().string() << " | " << c.text << " | " << c.source << " | "
                << c.cls << " | " << expected << " | " << measured << " | " << r.verdict << " |\n";
      ++checked;
      if (r.failed()) ++failed[c.cls];
    }
  // Exact claims hold on any machine: one failing fails the command. A cpu or gpu claim depends
  // on the hardware: it fails the command only when that class was asked for (--class).
  std::string failures;
  for (const auto& [cls, n] : failed) failures += (failures.empty() ? "" : ", ") + std::to_string(n) + " " + cls;
  std::cout << "\n" << checked << " claims checked, failed: " << (failures.empty() ? "none" : failures) << "\n";
  return failed.count("exact") > 0 || (!only.empty() && failed.count(only) > 0) ? 1 : 0;
}

}  // namespace inferlab::cli
