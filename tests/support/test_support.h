// Shared test helpers: where the shared data lives, and skipping visibly when it is missing.
#pragma once
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

namespace inferlab::testing {

// $INFERLAB_DATA, else <source>/../shared.
std::string data_dir();
// data_dir() + "/" + relative.
std::string data_path(const std::string& relative);
// The build tree's plugin directory.
std::string plugin_dir();
std::string source_dir();
std::string binary_dir();

}  // namespace inferlab::testing

// Skips the test with a message naming the missing file.
#define INFERLAB_REQUIRE_FILE(path)                                              \
  do {                                                                          \
    if (!std::filesystem::exists(path))                                         \
      GTEST_SKIP() << "data file missing: " << (path)                           \
                   << " (set INFERLAB_DATA to the shared data folder)";         \
  } while (0)
