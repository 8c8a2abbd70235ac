// TOML files a user hands the CLI (experiments, claim files, calibrated cost models), read and
// parsed one way: a regular file, its UTF-8 byte-order mark dropped (TOML 1.0 allows one), the
// text pre-scanned by check_toml_text before toml++ sees it (toml++ recurses once per dotted-key
// part and nesting level, so a 300k-part key would overflow the stack), and a syntax error an
// Error at file:line:column.
#pragma once
#include <string>

#include "inferlab/experiment/tomlpp.h"

namespace inferlab {

// The file's text without a byte-order mark; `expected` says what the file should be (in the
// message when it is a folder, a FIFO, missing...).
std::string read_toml_text(const std::string& path, const std::string& expected);
// check_toml_text, then toml++; `path` names the text in messages.
toml::table parse_toml_text(const std::string& text, const std::string& path);
// Both.
inline toml::table parse_toml_file(const std::string& path, const std::string& expected) {
  return parse_toml_text(read_toml_text(path, expected), path);
}

}  // namespace inferlab
