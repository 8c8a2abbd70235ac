#include "test_support.h"

#include <cstdlib>
#include <filesystem>

namespace inferlab::testing {

std::string data_dir() {
  if (const char* env = std::getenv("INFERLAB_DATA"); env && *env) return env;
  return (std::filesystem::path(INFERLAB_TEST_SOURCE_DIR).parent_path() / "shared").string();
}

std::string data_path(const std::string& relative) { return data_dir() + "/" + relative; }
std::string plugin_dir() { return INFERLAB_TEST_PLUGIN_DIR; }
std::string source_dir() { return INFERLAB_TEST_SOURCE_DIR; }
std::string binary_dir() { return INFERLAB_TEST_BINARY_DIR; }

}  // namespace inferlab::testing
