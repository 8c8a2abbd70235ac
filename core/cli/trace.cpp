// inferlab trace stats FILE | trace convert FILE --to canonical [--out FILE]
#include <fstream>
#include <iostream>

#include "commands.h"
#include "inferlab/error.h"
#include "inferlab/workload/trace_tools.h"
#include "inferlab/workload/workload.h"

namespace inferlab::cli {

namespace {

const char* kTraceUsage =
    "usage: inferlab trace stats FILE [--format F] [--model M] [--log-type L]\n"
    "       inferlab trace convert FILE --to canonical [--out FILE] [--format F] [--model M] [--log-type L]\n"
    "  --format   auto (default: from the header), canonical, azure, mooncake, vidur, burstgpt\n"
    "  --model, --log-type   BurstGPT row filters (Model, Log Type columns)\n";

}  // namespace

int cmd_trace(const std::vector<std::string>& args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::cout << kTraceUsage;
    return args.empty() ? 2 : 0;
  }
  const std::string sub = args[0];
  std::string file, format = "auto", to, out_path;
  TraceFilter filter;
  for (std::size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= args.size()) throw Error("inferlab trace: " + a + " needs a value\n" + kTraceUsage);
      return args[++i];
    };
    if (a == "--format") format = value();
    else if (a == "--model") filter.model = value();
    else if (a == "--log-type") filter.log_type = value();
    else if (a == "--to") to = value();
    else if (a == "--out") out_path = value();
    else if (!a.empty() && a[0] != '-' && file.empty()) file = a;
    else throw Error("inferlab trace: unexpected argument '" + a + "'\n" + kTraceUsage);
  }
  if (file.empty() || (sub != "stats" && sub != "convert")) {
    std::cerr << kTraceUsage;
    return 2;
  }
  const std::vector<TraceRow> rows = read_trace(file, format, filter);
  if (sub == "stats") {
    std::cout << "file " << file << "\nformat " << (format == "auto" ? detect_trace_format(file) : format) << "\n"
              << format_trace_stats(trace_stats(rows));
    return 0;
  }
  if (to != "canonical") throw Error("inferlab trace convert: --to '" + to + "'; allowed: canonical");
  const std::string csv = to_canonical_csv(rows);
  if (out_path.empty()) {
    std::cout << csv;
  } else {
    std::ofstream f(out_path, std::ios::binary);
    if (!(f << csv)) throw Error(out_path + ": cannot write the converted trace");
  }
  return 0;
}

}  // namespace inferlab::cli
