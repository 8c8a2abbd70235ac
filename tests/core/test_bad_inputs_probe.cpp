// The hostile-input probe of issue 42 (HEAD 811d0a3) as regression rows: text inputs, ranges,
// incomplete tables, located and bounded messages, names that are paths.
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "format_writers.h"
#include "gguf_fixtures.h"
#include "inferlab/formats/checkpoint.h"
#include "inferlab/device/cuda_device.h"
#include "inferlab/error.h"
#include "inferlab/experiment/experiment.h"
#include "inferlab/experiment/experiment_keys.h"
#include "inferlab/formats/formats.h"
#include "inferlab/experiment/input_checks.h"
#include "inferlab/support/log.h"
#include "inferlab/kv/memory_estimate.h"
#include "inferlab/plugin/registry.h"
#include "inferlab/results/report.h"
#include "inferlab/run/runner.h"
#include "inferlab/tokenizer/tokenizer.h"
#include "inferlab/workload/workload.h"

#include "bad_inputs.h"
#include "sanitizers.h"
#include "test_support.h"

namespace inferlab {
namespace {

namespace fs = std::filesystem;
using testing::error_of;
using bad_inputs::bounded_error;
using bad_inputs::kModel;
using bad_inputs::repeat;
using bad_inputs::trace_spec;
using Cli = testing::CliResult;
using bad_inputs::ConfigCase;
using bad_inputs::run_cli;

// ---- issue 42: text inputs, ranges, incomplete tables, located and bounded messages --------
// Each row was a hang, a blow-up, a silent acceptance or an unclear message in a probe of HEAD
// 811d0a3. CLI rows run the binary directly (no shell) and measure it: under 2 s and 200 MB.

namespace issue42 {

struct Measured {
  int code = -1;
  std::string err;
  double seconds = 0;
  long max_rss_kb = 0;
};

// Runs build/bin/inferlab with argv `args`, stdout discarded, stderr kept; its process group is
// killed after timeout_s. The peak resident memory comes from GNU time (-f %M) where installed:
// wait4 on a child forked from this test would report the test's own pages as well. -1 without it.
Measured run_measured(const std::vector<std::string>& args, const std::string& err_file, double timeout_s = 20) {
  const std::string bin = testing::binary_dir() + "/bin/inferlab", rss_file = err_file + ".rss";
  const bool timed = fs::exists("/usr/bin/time");
  std::vector<std::string> words;
  if (timed) words = {"/usr/bin/time", "-f", "%M", "-o", rss_file};
  words.push_back(bin);
  words.insert(words.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  const auto t0 = std::chrono::steady_clock::now();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);
    const int err = ::open(err_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    const int null = ::open("/dev/null", O_RDWR);
    ::dup2(null, 0);
    ::dup2(null, 1);
    ::dup2(err, 2);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  Measured m;
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > timeout_s) {
      ::kill(-pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      break;
    }
    ::usleep(5000);
  }
  m.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  m.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  m.err = testing::slurp(err_file);
  m.max_rss_kb = -1;
  if (timed) {  // the last line; GNU time writes "Command exited with non-zero status N" first
    const std::string rss = testing::slurp(rss_file);
    const std::size_t nl = rss.find_last_of('\n', rss.size() >= 2 ? rss.size() - 2 : 0);
    m.max_rss_kb = std::atol(rss.c_str() + (nl == std::string::npos ? 0 : nl + 1));
  }
  return m;
}

// The binary's own floor: `inferlab --help` loads every library a command does (a CUDA build maps
// cuBLAS: about 220 MB resident on the 2026-12 development machine); a row's budget is on top.
long floor_rss_kb(const testing::TempDir& dir) {
  static const long floor = run_measured({"--help"}, dir.file("help.txt")).max_rss_kb;
  return floor;
}

// A CLI row: exit 1 with one short line holding every part, in under 2 s and 200 MB.
void expect_cli_error(const testing::TempDir& dir, const std::vector<std::string>& args, const std::vector<std::string>& parts) {
  std::string shown;
  for (const auto& a : args) shown += " " + (a.size() > 60 ? a.substr(0, 60) + "..." : a);
  SCOPED_TRACE("inferlab" + shown);
  const Measured m = run_measured(args, dir.file("stderr.txt"));
  EXPECT_EQ(m.code, 1) << m.err;
  EXPECT_LT(m.seconds, 2.0) << m.err;
  if (m.max_rss_kb >= 0) {
    EXPECT_LT(m.max_rss_kb - floor_rss_kb(dir), 200 * 1024) << m.err;
  }
  std::printf("[ figures  ] %.3f s, peak RSS %ld KB (--help: %ld KB):%s\n", m.seconds, m.max_rss_kb, floor_rss_kb(dir),
              shown.c_str());
  EXPECT_LT(m.err.size(), 1000u) << m.err.substr(0, 2000);
  EXPECT_EQ(std::count(m.err.begin(), m.err.end(), '\n'), 1) << m.err.substr(0, 2000);
  for (const auto& p : parts) EXPECT_HAS(m.err, p);
}

std::string stories(const std::string& file) { return testing::data_path("models/stories260K/" + file); }

}  // namespace issue42

TEST(BadInputs, TextInputsAreRegularFilesOfBoundedSize) {
  testing::TempDir dir("bad_inputs_text");
  const std::string fifo = dir.file("text.fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string model = issue42::stories("stories260K.bin");
  INFERLAB_REQUIRE_FILE(model);
  // Each blocked forever on the FIFO, read /dev/zero into bad_alloc, or tokenised a folder as "".
  issue42::expect_cli_error(dir, {"perplexity", "--model", model, "--text", fifo},
                            {fifo + ": is a FIFO (named pipe), not a regular file; expected a text file for --text"});
  issue42::expect_cli_error(dir, {"tokenize", "--model", model, "--file", fifo}, {"is a FIFO (named pipe)", "for --file"});
  issue42::expect_cli_error(dir, {"perplexity", "--model", model, "--text", "/dev/zero"},
                            {"/dev/zero: is a character device, not a regular file"});
  issue42::expect_cli_error(dir, {"tokenize", "--model", model, "--file", "/dev/zero"}, {"/dev/zero: is a character device"});
  issue42::expect_cli_error(dir, {"tokenize", "--model", model, "--file", dir.path.string()},
                            {dir.path.string() + ": is a directory, not a regular file"});
  // The size cap, with a small limit (the real one is 256 MiB).
  testing::write_file(dir.file("big.txt"), std::string(100, 'a'));
  EXPECT_HAS(error_of([&] { read_text_file(dir.file("big.txt"), "--text", 99); }),
             "big.txt: 100 bytes; allowed for --text: at most 99 bytes");
  EXPECT_EQ(read_text_file(dir.file("big.txt"), "--text", 100).size(), 100u);
  // [quality] and [calibration] text: a FIFO is refused at validate, at its line.
  const std::string exp = dir.file("exp.toml");
  for (const char* table : {"quality", "calibration"}) {
    SCOPED_TRACE(table);
    testing::write_file(exp, std::string(kModel) + "[" + table + "]\ntext = \"" + fifo + "\"\n");
    const std::string err = bounded_error([&] { load_experiment(exp, {}); }, 2.0);
    EXPECT_HAS(err, exp + ":4:");
    EXPECT_HAS(err, "is a FIFO (named pipe), not a regular file; expected a text file for [" + std::string(table) + "] text");
  }
}

TEST(BadInputs, GenerateChecksPromptAndMaxTokensAgainstTheContext) {
  testing::TempDir dir("bad_inputs_generate");
  const std::string model = issue42::stories("stories260K.bin");
  INFERLAB_REQUIRE_FILE(model);
  // 99 s for a 16,000-token prompt before; "raise kv.num_blocks" for a billion tokens.
  issue42::expect_cli_error(dir, {"generate", "--model", model, "--max-tokens", "4", "--prompt", std::string(100000, 'a')},
                            {"--prompt is ", "tokens and --max-tokens 4", model + "'s context of 512 tokens"});
  issue42::expect_cli_error(dir, {"generate", "--model", model, "--max-tokens", "1000000000"},
                            {"--max-tokens 1000000000 is out of range for " + model + " (context 512 tokens); allowed: 1 .. 511"});
  const issue42::Measured ok = issue42::run_measured({"generate", "--model", model, "--max-tokens", "8", "--prompt", "Once", "--log", "warn"},
                                            dir.file("stderr.txt"));
  EXPECT_EQ(ok.code, 0) << ok.err;
  const std::string err = issue42::run_measured({"generate", "--model", model, "--max-tokens", "1000000000"}, dir.file("e.txt")).err;
  EXPECT_EQ(err.find("kv.num_blocks"), std::string::npos) << err;
}

TEST(BadInputs, DistributionParametersHaveRanges) {
  testing::TempDir dir("bad_inputs_ranges");
  const std::string path = dir.file("exp.toml");
  struct Case {
    std::string workload;
    std::vector<std::string> expect;
  };
  const std::vector<Case> cases = {
      // Gamma shape 1/1e300^2 = 0: NaN arrival times, and the cell never finished.
      {"arrival = \"gamma\"\nburstiness = 1e300\n", {":5:", "'burstiness' = 1e+300 is out of range; allowed: 0.001 .. 100"}},
      {"arrival = \"gamma\"\nburstiness = 1e10\n", {"allowed: 0.001 .. 100"}},
      {"arrival = \"poisson\"\nrate = 1e300\n", {"'rate' = 1e+300 is out of range; allowed: 1e-06 .. 1e+09"}},
      {"arrival = \"poisson\"\nrate = 1e-12\n", {"allowed: 1e-06 .. 1e+09"}},
      {"time_scale = 1e300\n", {"'time_scale' = 1e+300 is out of range; allowed: 0 .. 1e+06"}},
      {"timeout_s = 1e300\n", {"'timeout_s' = 1e+300 is out of range; allowed: 0 .. 1e+09"}},
      {"queue_timeout_s = 1e300\n", {"'queue_timeout_s'", "allowed: 0 .. 1e+09"}},
      {"prompt_len = { dist = \"lognormal\", mean = 64, sigma = 1e300 }\n", {"'prompt_len.sigma' = 1e+300 is out of range; allowed: 0 .. 10"}},
      {"prompt_len = { dist = \"lognormal\", mean = 1e300, sigma = 1 }\n", {"'prompt_len.mean'", "allowed: 1 .. 1.04858e+06"}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.workload);
    testing::write_file(path, std::string(kModel) + "[workload]\n" + c.workload);
    const std::string err = bounded_error([&] { load_experiment(path, {}); }, 2.0);
    for (const auto& part : c.expect) EXPECT_HAS(err, part);
  }
  // A spec built in code (not from a TOML) is refused by build_workload, at once.
  WorkloadSpec w;
  w.arrival = "gamma";
  w.num_requests = 100;
  w.burstiness = 1e300;
  EXPECT_HAS(bounded_error([&] { build_workload(w, 512); }, 2.0), "workload.burstiness = 1e+300; expected a coefficient of variation 0.001 .. 100");
  w.burstiness = 100;  // the edge of the range still draws finite arrivals
  for (const Request& r : build_workload(w, 512)) EXPECT_TRUE(std::isfinite(r.arrival_s));
}

TEST(BadInputs, TraceTimesOutsideTheirRangeNameTheRow) {
  testing::TempDir dir("bad_inputs_trace_range");
  struct Case {
    const char* name;
    std::string file, text;
    std::vector<std::string> expect;
  };
  const std::vector<Case> cases = {
      {"arrival 1e300 (csv)", "t.csv", "arrival_s,prompt_tokens,output_tokens\n0,4,4\n1e300,4,4\n",
       {"t.csv:3: arrival_s 1e300 is out of range", "a number 0 .. 1e10 (seconds, until the year 2286)"}},
      {"arrival 1e300 (jsonl)", "t.jsonl", "{\"arrival_s\": 1e300, \"prompt_tokens\": 4, \"output_tokens\": 4}\n",
       {"t.jsonl:1: arrival_s 1e300 is out of range"}},
      {"mooncake timestamp 1e300 ms", "m.jsonl", "{\"timestamp\": 1e300, \"input_length\": 4, \"output_length\": 1}\n",
       {"m.jsonl:1: timestamp 1e300 is out of range", "0 .. 1e13 (milliseconds"}},
      {"vidur arrived_at 1e300", "v.csv", "arrived_at,num_prefill_tokens,num_decode_tokens\n1e300,4,4\n", {"v.csv:2: arrived_at 1e300 is out of range"}},
      {"Azure offset +25:00", "a.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.1+25:00,3,4\n",
       {"a.csv:2: TIMESTAMP '2023-11-16 18:15:46.1+25:00' is not a timestamp", "a UTC offset of at most 18:00"}},
      {"Azure year 9999", "y.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n9999-11-16 18:15:46,3,4\n", {"y.csv:2: TIMESTAMP", "from 1970 to 2286"}},
      {"JSONL \\uZZZZ", "u.jsonl", "{\"arrival_s\": 0, \"prompt_tokens\": 4, \"output_tokens\": 4, \"note\": \"\\uZZZZ\"}\n",
       {"u.jsonl:1: a \\u escape without 4 hex digits (\\uZZZZ)"}},
      {"JSONL unknown escape", "e.jsonl", "{\"arrival_s\": 0, \"prompt_tokens\": 4, \"output_tokens\": 4, \"note\": \"\\q\"}\n",
       {"e.jsonl:1: an unknown escape '\\q'"}},
      // "'2000000000' is not an integer" before: it is; it is out of range.
      {"priority 2000000000", "p.csv", "arrival_s,prompt_tokens,output_tokens,priority\n0,4,4,2000000000\n",
       {"p.csv:2: priority 2000000000 is out of range", "an integer priority -1000000 .. 1000000"}},
      {"priority beyond 64 bits", "q.csv", "arrival_s,prompt_tokens,output_tokens,priority\n0,4,4,99999999999999999999\n",
       {"q.csv:2: priority '99999999999999999999' is out of range"}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    testing::write_file(dir.file(c.file), c.text);
    const std::string err = bounded_error([&] { build_workload(trace_spec(dir.file(c.file)), 512); }, 2.0);
    for (const auto& part : c.expect) EXPECT_HAS(err, part);
  }
  // Valid escapes, offsets and Unix-epoch arrivals still pass.
  testing::write_file(dir.file("ok.jsonl"), "{\"arrival_s\": 1700000000, \"prompt_tokens\": 4, \"output_tokens\": 4, \"n\": \"\\u00e9\\n\\\"\"}\n");
  EXPECT_EQ(build_workload(trace_spec(dir.file("ok.jsonl")), 512).size(), 1u);
  testing::write_file(dir.file("ok.csv"), "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46-08:00,3,4\n");
  EXPECT_EQ(build_workload(trace_spec(dir.file("ok.csv")), 512).size(), 1u);
}

TEST(BadInputs, LengthTablesListWhatTheyNeed) {
  testing::TempDir dir("bad_inputs_lengths");
  const std::string path = dir.file("exp.toml");
  struct Case {
    std::string table;
    std::vector<std::string> expect;
  };
  const std::vector<Case> cases = {
      // Both were accepted: { value = 5 } without dist, { dist = "fixed" } as a silent 64.
      {"{ value = 5 }", {":4:", "prompt_len table needs 'dist'; allowed: fixed, uniform, lognormal, trace"}},
      {"{ dist = \"fixed\" }", {":4:", "prompt_len with dist = \"fixed\" needs 'value'; allowed: { dist = \"fixed\", value = 64 }"}},
      {"{ dist = \"uniform\", max = 9 }", {"needs 'min'"}},
      {"{ dist = \"uniform\" }", {"needs 'min', 'max'"}},
      {"{ dist = \"lognormal\", mean = 20 }", {"needs 'sigma'"}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.table);
    testing::write_file(path, std::string(kModel) + "[workload]\nprompt_len = " + c.table + "\n");
    const std::string err = bounded_error([&] { load_experiment(path, {}); }, 2.0);
    for (const auto& part : c.expect) EXPECT_HAS(err, part);
  }
  testing::write_file(path, std::string(kModel) + "[workload]\nprompt_len = { dist = \"fixed\", value = 5 }\n");
  EXPECT_EQ(load_experiment(path, {}).workload.prompt_len.value, 5);
}

TEST(BadInputs, CommandLineFlagsRefusedLikeTheirTomlKeys) {
  testing::TempDir dir("bad_inputs_flags");
  const std::string exp = dir.file("exp.toml");
  testing::write_file(exp, std::string(kModel) + "[workload]\nnum_requests = 1\nprompt_len = 4\noutput_len = 2\n");
  issue42::expect_cli_error(dir, {"plugins", "--path", "/nonexistent"},
                            {"--path /nonexistent: no such folder; allowed: an existing folder of plugin libraries"});
  issue42::expect_cli_error(dir, {"plugins", "--path", exp}, {"not a folder"});
  issue42::expect_cli_error(dir, {"export", "--preset", "stories15m", "--n-layers", "1000", "--out", dir.file("m.gguf")},
                            {"--n-layers = 1000, but preset 'stories15m' has 6 layers; allowed: 0 (all) .. 6"});
  EXPECT_FALSE(fs::exists(dir.file("m.gguf")));
  issue42::expect_cli_error(dir, {"validate", exp, "--max-memory", "1e400GiB"}, {"--max-memory 1e400GiB: out of range"});
  issue42::expect_cli_error(dir, {"reproduce", "--class", "bogus"}, {"--class bogus is not a claim class; allowed: exact, cpu, gpu"});
  EXPECT_EQ(parse_memory_size("1e3MiB", "--max-memory"), 1000ull << 20);
  // validate refuses device.kind = cuda where run would: on a machine (or build) without a GPU.
  std::string reason;
  if (!cuda_device_visible(reason))
    issue42::expect_cli_error(dir, {"validate", exp, "--set", "device.kind=cuda"}, {"[device] kind = \"cuda\", but "});
}

TEST(BadInputs, TomlWithAByteOrderMarkIsAccepted) {
  testing::TempDir dir("bad_inputs_bom");
  const std::string path = dir.file("exp.toml");
  testing::write_file(path, "\xEF\xBB\xBF" + std::string(kModel) + "[experiment]\nrepeats = 3\n");
  EXPECT_EQ(load_experiment(path, {}).repeats, 3);
  testing::write_file(path, "\xEF\xBB\xBF" + std::string(kModel) + "[experiment]\nrepeats = 0\n");
  EXPECT_HAS(error_of([&] { load_experiment(path, {}); }), path + ":4:");  // line numbers unchanged
}

TEST(BadInputs, MemoryCheckCountsAddressSpaceAndCgroupLimits) {
  testing::TempDir dir("bad_inputs_rlimit");
  const std::string exp = dir.file("exp.toml");
  testing::write_file(exp, std::string(kModel) + "[baseline]\nkv = { num_blocks = 500000 }\n");
  // Under ulimit -v 6000000 (5.7 GiB) the run passed the check, then failed to allocate.
  // (AddressSanitizer reserves terabytes of shadow address space: no sanitized binary starts
  // under such a limit, so that build checks the cgroup half only.)
  if (!testing::kAddressSanitizer) {
    const Cli r = testing::run_inferlab_limited("validate " + exp, 6000000, 30);
    EXPECT_EQ(r.code, 1) << r.err;
    EXPECT_HAS(r.err, exp + ": the run needs about ");
    EXPECT_HAS(r.err, "this process's address-space limit (RLIMIT_AS, ulimit -v) is 5.72 GiB");
  }
  // cgroup v2 memory.max and v1 memory.limit_in_bytes, of the group or an ancestor.
  const fs::path root = dir.path / "sys";
  fs::create_directories(root / "a/b");
  fs::create_directories(root / "memory/x/y");
  testing::write_file((root / "a/memory.max").string(), "1073741824\n");
  testing::write_file((root / "a/b/memory.max").string(), "max\n");
  testing::write_file((root / "memory/x/y/memory.limit_in_bytes").string(), "536870912\n");
  testing::write_file((root / "memory/memory.limit_in_bytes").string(), "9223372036854771712\n");
  std::string file;
  EXPECT_EQ(cgroup_memory_limit("0::/a/b\n", root.string(), &file), 1ull << 30);
  EXPECT_EQ(file, (root / "a/memory.max").string());
  EXPECT_EQ(cgroup_memory_limit("4:memory:/x/y\n1:cpu:/z\n", root.string(), &file), 1ull << 29);
  EXPECT_EQ(cgroup_memory_limit("0::/a/b\n4:memory:/x/y\n", root.string()), 1ull << 29);
  EXPECT_EQ(cgroup_memory_limit("4:memory:/\n", root.string()), 0u);  // v1 "unlimited"
  EXPECT_EQ(cgroup_memory_limit("1:cpu:/x/y\n", root.string()), 0u);
}

TEST(BadInputs, ModelFilesWithUnclearMessagesBefore) {
  testing::TempDir dir("bad_inputs_models42");
  // A symbolic link loop as model.path: "unexpected error: filesystem error: status: ...".
  const std::string loop = dir.file("loop.bin");
  fs::create_symlink(loop, loop);
  const std::string exp = dir.file("exp.toml");
  testing::write_file(exp, "[model]\npath = \"" + loop + "\"\n");
  EXPECT_HAS(bounded_error([&] { load_experiment(exp, {}); }, 2.0), exp + ":2:8: " + loop + ": a symbolic link loop");

  // Byte patches of a tiny GGUF: the value after a key's name and type.
  auto patch = [](std::string bytes, const std::string& key, std::size_t skip, std::uint32_t value) {
    const std::size_t at = bytes.find(key);
    EXPECT_NE(at, std::string::npos) << key;
    std::memcpy(bytes.data() + at + key.size() + 4 + skip, &value, 4);
    return bytes;
  };
  const std::string tiny = testing::tiny_llama_gguf().bytes;
  // block_count 1e6 with tensors for 1 layer: "the run needs about 343 GiB ... lower n_layers".
  testing::write_file(dir.file("layers.gguf"), patch(tiny, "llama.block_count", 0, 1000000));
  EXPECT_HAS(bounded_error([&] { read_gguf_config(dir.file("layers.gguf")); }, 2.0),
             "layers.gguf: block_count 1000000, but the file's tensors cover 1 layer(s) (blk.0 .. blk.0); allowed: block_count <= 1");
  // token_type 99 (array: element type u32 + count u64 before the first element).
  testing::write_file(dir.file("types.gguf"), patch(tiny, "tokenizer.ggml.token_type", 12, 99));
  EXPECT_HAS(bounded_error([&] { load_model_tokenizer(dir.file("types.gguf"), ModelFormat::kGguf); }, 2.0),
             "types.gguf: tokenizer.ggml.token_type of token 0 is 99; allowed: 0 .. 6");

  // rope.dimension_count 64 with head dim 8: "partial rotary embeddings (64 < 8)".
  auto header = [](testing::GgufBuilder& g) {
    g.string("general.architecture", "llama");
    g.u32("llama.embedding_length", 32);
    g.u32("llama.feed_forward_length", 64);
    g.u32("llama.block_count", 1);
    g.u32("llama.attention.head_count", 4);
  };
  testing::GgufBuilder rope;
  header(rope);
  rope.u32("llama.rope.dimension_count", 64);
  testing::write_file(dir.file("rope.gguf"), rope.build());
  EXPECT_HAS(bounded_error([&] { read_gguf_config(dir.file("rope.gguf")); }, 2.0),
             "rope.gguf: rope.dimension_count 64 exceeds the head dim 8 (embedding_length / head_count); allowed: 8");
  // Token strings all empty: "tokenizer: no piece for input and no byte fallback", no file.
  testing::GgufBuilder empty;
  header(empty);
  empty.string("tokenizer.ggml.model", "llama");
  empty.strings("tokenizer.ggml.tokens", std::vector<std::string>(8));
  testing::write_file(dir.file("empty.gguf"), empty.build());
  EXPECT_HAS(bounded_error([&] { load_model_tokenizer(dir.file("empty.gguf"), ModelFormat::kGguf); }, 2.0),
             "empty.gguf: tokenizer.ggml.tokens: all 8 token strings are empty");

  // HF num_hidden_layers 1e6 with tensors for 1 layer.
  const fs::path hf = dir.path / "hf";
  fs::create_directories(hf);
  testing::write_file((hf / "config.json").string(),
                      R"({"architectures": ["X"], "model_type": "llama", "hidden_size": 16, "intermediate_size": 24,
                          "num_hidden_layers": 1000000, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 40,
                          "max_position_embeddings": 64, "rope_theta": 10000.0, "rms_norm_eps": 1e-06,
                          "tie_word_embeddings": true, "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "silu",
                          "torch_dtype": "float32"})");
  std::string st = R"({"model.layers.0.input_layernorm.weight":{"dtype":"F32","shape":[16],"data_offsets":[0,64]}})";
  while (st.size() % 8) st += ' ';
  std::string bytes;
  testing::append_pod<std::uint64_t>(bytes, st.size());
  bytes += st + std::string(64, '\0');
  testing::write_file((hf / "model.safetensors").string(), bytes);
  EXPECT_HAS(bounded_error([&] { read_hf_config(hf.string()); }, 2.0),
             "config.json: num_hidden_layers 1000000, but the checkpoint's tensors cover 1 layer(s)");
}

TEST(BadInputs, SweepValuesAreLocatedInTheFile) {
  testing::TempDir dir("bad_inputs_sweep");
  const std::string path = dir.file("exp.toml");
  testing::write_file(path, std::string(kModel) + "[sweep]\n\"kv.block_size\" = [16, 0]\n");
  const std::string err = bounded_error([&] { load_experiment(path, {}); }, 2.0);
  EXPECT_HAS(err, path + ":4:");
  EXPECT_HAS(err, "'kv.block_size' = 0 is out of range");
  EXPECT_EQ(err.find("(--set)"), std::string::npos) << err;
}

TEST(BadInputs, ErrorsQuoteAtMost80CharactersEscaped) {
  testing::TempDir dir("bad_inputs_quote");
  EXPECT_EQ(quote_input("a\tb\nc\x01\x7f"), "a\\tb\\nc\\x01\\x7f");
  EXPECT_EQ(quote_input(std::string(200, 'x')), std::string(80, 'x') + "... (200 bytes)");
  // A 1 MB TOML key was echoed whole (1 MB of stderr).
  const std::string path = dir.file("exp.toml");
  testing::write_file(path, std::string(kModel) + std::string(1 << 20, 'k') + " = 1\n");
  std::string err = bounded_error([&] { load_experiment(path, {}); }, 2.0);
  EXPECT_HAS(err, "unknown key '" + std::string(80, 'k') + "... (1048576 bytes)'");
  EXPECT_LT(err.size(), 600u);
  // A 10 MB trace line, and binary bytes that reached the terminal raw.
  testing::write_file(dir.file("long.csv"), "arrival_s,prompt_tokens,output_tokens\n0," + std::string(10 << 20, '7') + "x,4\n");
  err = bounded_error([&] { build_workload(trace_spec(dir.file("long.csv")), 512); }, 2.0);
  EXPECT_HAS(err, "long.csv:2: prompt_tokens '" + std::string(80, '7') + "... (10485761 bytes)' is not an integer");
  EXPECT_LT(err.size(), 600u);
  testing::write_file(dir.file("bin.csv"), std::string("\x1b[2J\x07\x00\xff" "abc", 10) + "\n1,2,3\n");
  err = bounded_error([&] { build_workload(trace_spec(dir.file("bin.csv")), 512); }, 2.0);
  EXPECT_HAS(err, "unrecognised header '\\x1b[2J\\x07\\x00\xff" "abc'");
  for (char ch : err) EXPECT_FALSE(static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f) << err;
  const Cli c = run_cli("validate " + path);  // as the CLI prints it
  EXPECT_EQ(c.code, 1);
  EXPECT_LT(c.err.size(), 600u);
}

TEST(BadInputs, FuzzDictionaryHasEveryExperimentKey) {
  // Every key of every table the experiment parser checks (experiment_tables()) is in
  // tests/fuzz/experiment.dict, so a key added to the parser is added to the fuzzer's words too.
  const std::string dict = testing::slurp(testing::source_dir() + "/tests/fuzz/experiment.dict");
  ASSERT_FALSE(dict.empty());
  int keys = 0;
  for (const auto& table : experiment_tables())
    for (const auto& key : table.keys) {
      SCOPED_TRACE(table.name);
      EXPECT_HAS(dict, "=\"" + key + "\"\n");
      ++keys;
    }
  EXPECT_GT(keys, 60);
  for (const char* key : {"attention", "quantization", "scheduler", "decoding", "kv"}) EXPECT_HAS(dict, "=\"" + std::string(key) + "\"\n");
  // libFuzzer's format: name="value" lines (or comments); a malformed line fails the whole run.
  std::istringstream lines(dict);
  for (std::string line; std::getline(lines, line);)
    if (!line.empty() && line[0] != '#') {
      const std::size_t eq = line.find("=\"");
      EXPECT_TRUE(eq != std::string::npos && line.back() == '"') << line;
    }
}

TEST(BadInputs, ProbeHangsAndSilentAcceptancesAreQuickCliErrors) {
  // The probe's hang, blow-up and silent-acceptance cases as a user meets them, through
  // `inferlab validate` / `tokenize`: each a one-line error in under 2 s and 200 MB.
  testing::TempDir dir("bad_inputs_probe");
  auto file = [&](const std::string& name, const std::string& text) {
    testing::write_file(dir.file(name), text);
    return dir.file(name);
  };
  auto with_workload = [&](const std::string& name, const std::string& workload) {
    return file(name, std::string(kModel) + "[workload]\n" + workload);
  };
  const std::string gamma = with_workload("gamma.toml", "arrival = \"gamma\"\nburstiness = 1e300\n");
  issue42::expect_cli_error(dir, {"validate", gamma}, {gamma + ":5:14: 'burstiness' = 1e+300 is out of range; allowed: 0.001 .. 100"});
  const std::string value = with_workload("value.toml", "prompt_len = { value = 5 }\n");
  issue42::expect_cli_error(dir, {"validate", value}, {value + ":4:", "prompt_len table needs 'dist'"});
  const std::string fixed = with_workload("fixed.toml", "prompt_len = { dist = \"fixed\" }\n");
  issue42::expect_cli_error(dir, {"validate", fixed}, {fixed + ":4:", "needs 'value'"});
  const struct {
    const char* name;
    std::string text, expect;
  } traces[] = {
      {"far.csv", "arrival_s,prompt_tokens,output_tokens\n0,4,4\n1e300,4,4\n", "far.csv:3: arrival_s 1e300 is out of range"},
      {"azure.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46+25:00,3,4\n", "azure.csv:2: TIMESTAMP"},
      {"escape.jsonl", "{\"arrival_s\": 0, \"prompt_tokens\": 4, \"output_tokens\": 4, \"n\": \"\\uZZZZ\"}\n",
       "escape.jsonl:1: a \\u escape without 4 hex digits"},
  };
  for (const auto& t : traces) {
    const std::string exp = with_workload(std::string(t.name) + ".toml", "trace = \"" + file(t.name, t.text) + "\"\n");
    issue42::expect_cli_error(dir, {"validate", exp}, {t.expect});
  }
  // GGUF token_type 99 through tokenize (byte-patched tiny GGUF: the array's first element).
  std::string gguf = testing::tiny_llama_gguf().bytes;
  const std::string key = "tokenizer.ggml.token_type";
  const std::uint32_t bad = 99;
  std::memcpy(gguf.data() + gguf.find(key) + key.size() + 4 + 12, &bad, 4);
  const std::string types = file("types.gguf", gguf);
  issue42::expect_cli_error(dir, {"tokenize", "--model", types, "--prompt", "abc"},
                            {"types.gguf: tokenizer.ggml.token_type of token 0 is 99"});
}

// ---- names that are paths (issue 42) ----------------------------------------------------------

// Experiment, variant and sweep names are names: letters, digits and - _ . + =, never "." or
// "..", no separator. `name = ".."` once wrote the results into the parent of --out, and "."
// the stamp folder straight into the results root.
TEST(BadInputs, NamesThatArePathsAreRefusedAtValidate) {
  testing::TempDir dir("bad_inputs_names");
  const std::string allowed = "allowed: 1 to 128 letters, digits and - _ . + = (not . or ..)";
  const std::vector<ConfigCase> cases = {
      {"experiment ..", std::string(kModel) + "[experiment]\nname = \"..\"\n", {}, {":4:8: [experiment] name '..' is a path", allowed}},
      {"experiment .", std::string(kModel) + "[experiment]\nname = \".\"\n", {}, {":4:8: [experiment] name '.' is a path", allowed}},
      {"experiment a/b", std::string(kModel) + "[experiment]\nname = \"a/b\"\n", {},
       {":4:8: [experiment] name 'a/b' has '/' at position 2", allowed}},
      {"experiment ../x by --set", std::string(kModel), {"experiment.name=\"../x\""}, {"(--set)", "[experiment] name '../x' has '/'"}},
      {"experiment with a backslash", std::string(kModel) + "[experiment]\nname = 'a\\b'\n", {}, {"has '\\' at position 2"}},
      {"empty experiment name", std::string(kModel) + "[experiment]\nname = \"\"\n", {}, {"[experiment] name '' is empty"}},
      {"variant ..", std::string(kModel) + "[[variant]]\nname = \"..\"\n", {}, {":4:8: [[variant]] name '..' is a path", allowed}},
      {"variant a/b", std::string(kModel) + "[[variant]]\nname = \"a/b\"\n", {}, {"[[variant]] name 'a/b' has '/' at position 2"}},
      {"variant with a newline", std::string(kModel) + "[[variant]]\nname = \"a\\nb\"\n", {}, {"'a\\x0ab' has '\\x0a' at position 2"}},
      {"variant with a space", std::string(kModel) + "[[variant]]\nname = \"flash int8\"\n", {}, {"has a space at position 6"}},
      {"long variant name", std::string(kModel) + "[[variant]]\nname = \"" + std::string(300, 'v') + "\"\n", {},
       {"'" + std::string(40, 'v') + "...' has 300 characters"}},
      {"sweep key with a slash", std::string(kModel) + "[sweep]\n\"attention/x\" = [\"naive\"]\n", {},
       {":4:17: [sweep] key 'attention/x' has '/'"}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string path = dir.file("exp.toml");
    testing::write_file(path, c.toml);
    const std::string err = bounded_error([&] { load_experiment(path, c.overrides); });
    ASSERT_FALSE(err.empty()) << "accepted";
    for (const auto& part : c.expect) EXPECT_HAS(err, part);
  }
  // The file's stem names an experiment without [experiment] name: a stem that is no name is refused.
  const std::string spaced = dir.file("my run.toml");
  testing::write_file(spaced, kModel);
  EXPECT_HAS(bounded_error([&] { load_experiment(spaced, {}); }), spaced + ": the experiment name (the file's stem");
  // validate says the same, and exits 1.
  const std::string dots = dir.file("dots.toml");
  testing::write_file(dots, std::string(kModel) + "[experiment]\nname = \"..\"\n");
  const Cli v = run_cli("validate " + dots);
  EXPECT_EQ(v.code, 1) << v.err;
  EXPECT_HAS(v.err, dots + ":4:8: [experiment] name '..' is a path, not a name; " + allowed);
  // Names in the allowed set pass; a sweep string that is no name names its point by position.
  const std::string ok = dir.file("ok.toml");
  testing::write_file(ok, std::string(kModel) + "[experiment]\nname = \"a.b+c=d_e-f\"\n[[variant]]\nname = \"x=1,y\"\n");
  EXPECT_HAS(bounded_error([&] { load_experiment(ok, {}); }), "[[variant]] name 'x=1,y' has ','");
  testing::write_file(ok, std::string(kModel) + "[experiment]\nname = \"a.b+c=d_e-f\"\n[sweep]\n\"decoding.while_exists\" = [\"/tmp/g\", \"g\"]\n");
  const ExperimentSpec spec = load_experiment(ok, {});
  ASSERT_EQ(spec.variants.size(), 3u);
  EXPECT_EQ(spec.variants[1].name, "decoding.while_exists=#1");
  EXPECT_EQ(spec.variants[2].name, "decoding.while_exists=g");
  // The library path that skips validation still cannot leave --out.
  for (const char* name : {"..", ".", "a/b", ""})
    EXPECT_HAS(error_of([&] { ResultWriter w(dir.file("out"), name); }), "would put the results folder outside");
}

}  // namespace
}  // namespace inferlab
