// libFuzzer target: every trace reader (canonical CSV/JSONL, azure, mooncake, vidur, burstgpt,
// auto-detection) and the lengths-file reader. Input: one selector byte (reader and file
// extension), then the file's bytes. Only inferlab::Error may leave.
#include <cstddef>
#include <cstdint>
#include <string>

#include "input_files.h"
#include "inferlab/error.h"
#include "inferlab/workload/workload.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace inferlab;
  if (size < 1) return 0;
  static const char* const kFormats[] = {"auto", "canonical", "azure", "mooncake", "vidur", "burstgpt", "lengths"};
  const int which = data[0] % 7;
  const std::string path = fuzz::write_input((data[0] & 0x80) ? "trace.jsonl" : "trace.csv",
                                             fuzz::as_text(data + 1, size - 1));
  try {
    if (which == 6) {
      read_lengths_file(path);
    } else {
      TraceFilter filter;
      if (data[0] & 0x40) filter.model = "ChatGPT";
      read_trace(path, kFormats[which], filter);
    }
  } catch (const Error&) {
  }
  try {
    detect_trace_format(path);
  } catch (const Error&) {
  }
  return 0;
}
