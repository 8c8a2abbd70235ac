// inferlab: run, submit, merge, compare, plot, report, validate, plugins, generate, perplexity, bench, export, trace, tokenize, reproduce, calibrate, conformance, kernels.
#include <algorithm>
#include <iostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/program_options/errors.hpp>

#include "commands.h"
#include "inferlab/error.h"
#include "inferlab/experiment/input_checks.h"

namespace {

const char* kUsage =
    "usage: inferlab <command> [options]\n"
    "commands:\n"
    "  run FILE [--set key=value]... [--out DIR] [--repeats N]   run an experiment\n"
    "  run --resume DIR [--force-config]                         finish an interrupted run's missing cells\n"
    "  run FILE --shard i/n                                      run one shard of the variant x repeat cells\n"
    "  submit FILE --slurm [--array-size n] [--partition P] [--time T] [--dry-run]   shards as a Slurm job array + merge job\n"
    "  merge SHARD_DIR... --out DIR [--allow-partial]            combine shard folders into one results folder\n"
    "  compare RUN_A RUN_B [--metric m]...                       means, ratios B/A and Welch t-tests per variant\n"
    "  plot RUN_DIR                                              PNG figures beside the results (matplotlib)\n"
    "  report RUN_DIR...                                         one self-contained report.html (table, figures, manifest)\n"
    "  validate FILE [--set key=value]...                        check an experiment without running it\n"
    "  plugins [--kind K]                                        list plugins and their parameters\n"
    "  conformance PLUGIN.so... [--filter PATTERN]               run the conformance suites of its kind on a plugin\n"
    "  generate --model M [--prompt P] [--temperature X] ...     stream text from a model\n"
    "  perplexity --model M --text FILE [--context N] [--stride S] [--no-bos]\n"
    "  tokenize --model M (--prompt TEXT | --file F) [--ids | --pieces] [--no-bos] [--check]\n"
    "  bench [--model M | --preset P] [--attention a,b] [--quantization x,y]   forward-pass A/B\n"
    "  kernels [--rows 1,2,4] [--out N] [--in N] [--format F]   the CPU kernel each weight format runs per row count\n"
    "  export (--model M | --preset P) --format gguf --type f32|f16|q8_0|q4_0 --out F   weights for llama.cpp\n"
    "  trace stats FILE | trace convert FILE --to canonical      trace statistics, format conversion\n"
    "  reproduce [--class exact|cpu|gpu] [FILE...]               check published claims (experiments/repro)\n"
    "  calibrate FILE [--out PATH]                               fit a step cost model of this CPU for simulation\n"
    "`inferlab <command> --help` shows a command's options.\n";

// The allowed values of numeric options, for the message when Boost cannot read a value (a
// negative count, or one beyond the type's range).
std::string allowed_values(const std::string& option) {
  static const std::pair<const char*, const char*> kRanges[] = {
      {"--repeats", "an integer 1 .. 1000"},
      {"--threads", "an integer 0 (all cores) .. 4096"},
      {"--max-tokens", "a non-negative integer below 2^31"},
      {"--context", "0 (the model's context) or an integer 2 .. 16777216"},
      {"--stride", "an integer 0 .. 16777216"},
      {"--top-k", "a non-negative integer below 2^31"},
      {"--top-p", "a number in (0, 1]"},
      {"--temperature", "a number >= 0"},
      {"--seed", "an integer 0 .. 18446744073709551615"},
  };
  for (const auto& [name, allowed] : kRanges)
    if (option == name) return allowed;
  return "a value of the type --help shows";
}

// An error as printed: control bytes escaped (a message's own line breaks kept, as before a usage
// text), each line cut after kMaxMessageChars characters.
std::string shown(const char* what) {
  const std::string_view text(what);
  std::string out;
  for (std::size_t start = 0; start <= text.size();) {
    const std::size_t end = std::min(text.find('\n', start), text.size());
    out += (start ? "\n" : "") + inferlab::quote_input(text.substr(start, end - start), inferlab::kMaxMessageChars);
    start = end + 1;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
    std::cout << kUsage;
    return argc < 2 ? 2 : 0;
  }
  const std::string cmd = argv[1];
  const std::vector<std::string> args(argv + 2, argv + argc);
  try {
    if (cmd == "run") return inferlab::cli::cmd_run(args);
    if (cmd == "validate") return inferlab::cli::cmd_validate(args);
    if (cmd == "plugins") return inferlab::cli::cmd_plugins(args);
    if (cmd == "generate") return inferlab::cli::cmd_generate(args);
    if (cmd == "perplexity") return inferlab::cli::cmd_perplexity(args);
    if (cmd == "bench") return inferlab::cli::cmd_bench(args);
    if (cmd == "trace") return inferlab::cli::cmd_trace(args);
    if (cmd == "tokenize") return inferlab::cli::cmd_tokenize(args);
    if (cmd == "submit") return inferlab::cli::cmd_submit(args);
    if (cmd == "merge") return inferlab::cli::cmd_merge(args);
    if (cmd == "compare") return inferlab::cli::cmd_compare(args);
    if (cmd == "plot") return inferlab::cli::cmd_plot(args);
    if (cmd == "report") return inferlab::cli::cmd_report(args);
    if (cmd == "reproduce") return inferlab::cli::cmd_reproduce(args);
    if (cmd == "calibrate") return inferlab::cli::cmd_calibrate(args);
    if (cmd == "export") return inferlab::cli::cmd_export(args);
    if (cmd == "conformance") return inferlab::cli::cmd_conformance(args);
    if (cmd == "kernels") return inferlab::cli::cmd_kernels(args);
    std::cerr << "inferlab: unknown command '" << cmd << "'\n" << kUsage;
    return 2;
  } catch (const boost::program_options::invalid_option_value& e) {
    std::cerr << "inferlab " << cmd << ": " << shown(e.what()) << "; allowed: " << allowed_values(e.get_option_name())
              << " (see inferlab " << cmd << " --help)\n";
    return 2;
  } catch (const boost::program_options::error& e) {
    std::cerr << "inferlab " << cmd << ": " << shown(e.what()) << " (see inferlab " << cmd << " --help)\n";
    return 2;
  } catch (const inferlab::Error& e) {
    std::cerr << "inferlab: error: " << shown(e.what()) << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "inferlab: unexpected error: " << shown(e.what()) << "\n";
    return 1;
  }
}
