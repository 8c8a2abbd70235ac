// The inferlab subcommands. Each takes the arguments after its name and returns the exit code;
// inferlab::Error escapes to main, which prints it on one line.
#pragma once
#include <string>
#include <vector>

namespace inferlab::cli {

int cmd_run(const std::vector<std::string>& args);
int cmd_validate(const std::vector<std::string>& args);
int cmd_plugins(const std::vector<std::string>& args);
int cmd_generate(const std::vector<std::string>& args);
int cmd_perplexity(const std::vector<std::string>& args);
int cmd_bench(const std::vector<std::string>& args);
int cmd_trace(const std::vector<std::string>& args);

}  // namespace inferlab::cli
