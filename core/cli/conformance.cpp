// inferlab conformance LIB.so...: the conformance suites of each library's plugin kind, run on
// that library by the test_conformance program (tests/conformance), which sits beside this one in
// a build tree (build/bin) and in <prefix>/libexec/inferlab once installed.
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>

#include <boost/program_options.hpp>

#include "commands.h"
#include "inferlab/error.h"

namespace po = boost::program_options;

namespace inferlab::cli {

namespace {

namespace fs = std::filesystem;

// test_conformance beside this executable, or in ../libexec/inferlab; "" with `looked` set.
std::string conformance_runner(std::string& looked) {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  for (const fs::path& p : {self.parent_path() / "test_conformance",
                            self.parent_path().parent_path() / "libexec" / "inferlab" / "test_conformance"}) {
    if (fs::is_regular_file(p, ec) && access(p.c_str(), X_OK) == 0) return p.string();
    looked += (looked.empty() ? "" : ", ") + p.lexically_normal().string();
  }
  return "";
}

}  // namespace

int cmd_conformance(const std::vector<std::string>& args) {
  po::options_description o("conformance options");
  o.add_options()("libraries", po::value<std::vector<std::string>>()->multitoken(), "plugin libraries (lib*.so)")(
      "filter", po::value<std::string>(), "run only the cases matching this GoogleTest pattern, e.g. '*/onepass_cpu_default'");
  po::positional_options_description pos;
  pos.add("libraries", -1);
  po::variables_map vm;
  if (!parse_options(args, "usage: inferlab conformance PLUGIN.so... [--filter PATTERN]\n"
                           "Runs the conformance suites of each plugin's kind on it (every device it declares, default\n"
                           "and boundary parameters) and prints pass/fail per case; exits 1 if any case fails.",
                     o, &pos, vm))
    return 0;
  if (!vm.count("libraries")) throw Error("conformance needs at least one plugin library, e.g. inferlab conformance build/libinferlab_attention_x.so");
  std::vector<std::string> argv_text;
  std::string looked;
  const std::string runner = conformance_runner(looked);
  if (runner.empty())
    throw Error("this inferlab has no conformance runner test_conformance (looked in " + looked +
                "); build it with the tests (INFERLAB_TESTS=ON, GoogleTest installed)");
  argv_text.push_back(runner);
  for (const std::string& lib : vm["libraries"].as<std::vector<std::string>>()) {
    std::error_code ec;
    if (!fs::is_regular_file(lib, ec)) throw Error(lib + ": no such file; allowed: a plugin library (lib*.so)");
    argv_text.push_back(fs::absolute(lib).lexically_normal().string());
  }
  if (vm.count("filter")) argv_text.push_back("--gtest_filter=" + vm["filter"].as<std::string>());
  std::vector<char*> argv;
  for (std::string& a : argv_text) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::cout << std::flush;
  execv(runner.c_str(), argv.data());
  throw Error("cannot run " + runner + ": " + std::strerror(errno));
}

}  // namespace inferlab::cli
