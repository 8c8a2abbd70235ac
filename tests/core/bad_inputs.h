// Helpers shared by the bad-input tests (test_bad_inputs.cpp: the readers' and the CLI's
// errors; test_bad_inputs_probe.cpp: the hostile-input probe's rows).
#pragma once
#include <chrono>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "inferlab/workload/workload.h"
#include "test_support.h"

namespace inferlab::bad_inputs {

// Runs f and returns its Error message; fails the test if it took longer than `seconds`.
inline std::string bounded_error(const std::function<void()>& f, double seconds = 5.0) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::string err = testing::error_of(f);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(took, seconds) << "took " << took << " s: " << err;
  return err;
}

#define EXPECT_HAS(text, part) EXPECT_NE(std::string(text).find(part), std::string::npos) << "in: " << (text)

inline std::string repeat(const std::string& s, int n) {
  std::string out;
  out.reserve(s.size() * static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

inline constexpr const char* kModel = "[model]\npreset = \"stories260k\"\n";

// A workload reading the trace at `path`.
inline WorkloadSpec trace_spec(const std::string& path) {
  WorkloadSpec w;
  w.trace = path;
  return w;
}

struct ConfigCase {
  const char* name;
  std::string toml;
  std::vector<std::string> overrides;
  std::vector<std::string> expect;  // parts of the message
};

// `inferlab ARGS` (the build's binary), 30 s at most.
inline testing::CliResult run_cli(const std::string& args) { return testing::run_inferlab(args, "", 30); }

}  // namespace inferlab::bad_inputs
