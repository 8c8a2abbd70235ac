// test_conformance: the conformance suite of each plugin kind, over every built-in plugin (what
// ctest runs) or over the plugin libraries named on the command line, in-tree or out-of-tree:
//   test_conformance [--gtest_* flags] [LIB.so ...]
// `inferlab conformance LIB.so...` runs this (installed in <prefix>/libexec/inferlab). A library
// that does not load as a plugin is an error (exit 2); a plugin none of whose cases ran (every one
// skipped, or filtered out) fails the run (exit 1), since nothing about it was shown.
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "plugin_cases.h"

namespace {

// "attention/onepass" from a case's printed parameter ("attention/onepass on cpu, tile = 1").
std::string plugin_label(const char* value_param) {
  const std::string p = value_param ? value_param : "";
  return p.substr(0, p.find(" on "));
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<char*> args{argv[0]};
  std::vector<std::string> libraries;
  for (int i = 1; i < argc; ++i) {
    if (argv[i][0] == '-') args.push_back(argv[i]);
    else libraries.emplace_back(argv[i]);
  }
  if (!libraries.empty()) {
    const std::string problem = inferlab::testing::set_plugins_under_test(libraries);
    if (!problem.empty()) {
      std::fprintf(stderr, "conformance: %s\n", problem.c_str());
      return 2;
    }
  }
  int n = static_cast<int>(args.size());
  args.push_back(nullptr);  // argv[argc] is null: InitGoogleTest moves it down with the flags it takes
  ::testing::InitGoogleTest(&n, args.data());  // the suites list their cases here
  if (!libraries.empty()) {  // the check of the built-in plugins' folder is not about these
    std::string filter = GTEST_FLAG_GET(filter);
    filter += filter.find('-') == std::string::npos ? "-" : ":";
    GTEST_FLAG_SET(filter, filter + "ConformancePluginDiscovery.*");
  }
  const int rc = RUN_ALL_TESTS();
  if (libraries.empty() || rc != 0) return rc;
  std::map<std::string, int> ran;  // plugin -> cases that ran and passed
  for (const std::string& plugin : inferlab::testing::plugin_labels_under_test()) ran[plugin] = 0;
  const ::testing::UnitTest& unit = *::testing::UnitTest::GetInstance();
  for (int s = 0; s < unit.total_test_suite_count(); ++s) {
    const ::testing::TestSuite& suite = *unit.GetTestSuite(s);
    for (int t = 0; t < suite.total_test_count(); ++t) {
      const ::testing::TestInfo& info = *suite.GetTestInfo(t);
      if (!info.value_param()) continue;
      int& count = ran[plugin_label(info.value_param())];
      if (info.should_run() && info.result()->Passed() && !info.result()->Skipped()) ++count;
    }
  }
  int idle = 0;
  for (const auto& [plugin, count] : ran)
    if (count == 0) {
      std::printf("conformance: no case of %s ran (every one was skipped or filtered out): nothing was checked\n",
                  plugin.c_str());
      ++idle;
    }
  return idle > 0 ? 1 : 0;
}
