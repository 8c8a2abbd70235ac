#include "inferlab/experiment/toml_input.h"

#include <fstream>
#include <sstream>

#include "inferlab/error.h"
#include "inferlab/experiment/input_checks.h"

namespace inferlab {

std::string read_toml_text(const std::string& path, const std::string& expected) {
  require_regular_file(path, expected);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot open " + expected);
  std::stringstream buf;
  buf << in.rdbuf();
  std::string text = buf.str();
  if (text.rfind("\xEF\xBB\xBF", 0) == 0) text.erase(0, 3);
  return text;
}

toml::table parse_toml_text(const std::string& text, const std::string& path) {
  check_toml_text(text, path);
  try {
    return toml::parse(text, path);
  } catch (const toml::parse_error& e) {
    throw Error(path + ":" + std::to_string(e.source().begin.line) + ":" + std::to_string(e.source().begin.column) +
                ": " + std::string(e.description()));
  }
}

}  // namespace inferlab
