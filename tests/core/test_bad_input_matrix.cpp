// The bad-input matrix of issue 15, as a new user meets it: one case per class of defect (the
// crash, memory blow-up and hang cases at the sizes reported), each run through the `inferlab`
// command in a child process whose address space is capped at 1 GiB (ulimit -v; not under
// AddressSanitizer, whose shadow memory needs terabytes of address space) and which is killed
// after kSeconds. Each must exit with the expected status and a message naming the file, line or
// flag and what is allowed; the accepted-with-a-warning cases must name what was changed.
// The in-process regression tests of each defect are in test_bad_inputs.cpp.
#include <sys/stat.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "format_writers.h"
#include "sanitizers.h"
#include "test_support.h"

namespace inferlab {
namespace {

constexpr int kSeconds = 30;                    // generous for a loaded 2-core machine; cases take < 2 s
constexpr long long kAddressSpaceKiB = 1 << 20;  // 1 GiB

std::string repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

std::string numbers(int n) {
  std::string s;
  for (int i = 1; i <= n; ++i) s += (i > 1 ? "," : "") + std::to_string(i);
  return s;
}

struct Case {
  const char* klass;  // the issue's class of defect
  std::string args;
  int code;
  std::vector<std::string> expect;  // parts of stderr
};

TEST(BadInputMatrix, EveryClassEndsInAClearMessageUnderOneGigabyte) {
  testing::TempDir dir("bad_input_matrix");
  const std::string model = "[model]\npreset = \"stories260k\"\n";
  const std::string small = model + "[workload]\nnum_requests = 2\nprompt_len = 4\noutput_len = 2\n";
  auto file = [&](const std::string& name, const std::string& text) {
    testing::write_file(dir.file(name), text);
    return dir.file(name);
  };
  const std::string stories = testing::data_path("models/stories260K/stories260K.bin");
  const std::string tok = testing::data_path("models/stories260K/tok512.bin");
  INFERLAB_REQUIRE_FILE(stories);
  INFERLAB_REQUIRE_FILE(tok);
  const std::string fifo = dir.file("fifo.bin");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // A 512-token llama2.c tokenizer whose third score is NaN.
  std::string nan_tok;
  testing::append_pod<std::int32_t>(nan_tok, 8);
  for (int i = 0; i < 512; ++i) {
    testing::append_pod<float>(nan_tok, i == 2 ? std::numeric_limits<float>::quiet_NaN() : -static_cast<float>(i));
    const std::string piece = "t" + std::to_string(i);
    testing::append_pod<std::int32_t>(nan_tok, static_cast<std::int32_t>(piece.size()));
    nan_tok += piece;
  }
  std::string hf_header = R"({"model.norm.weight":{"dtype":"F32","shape":[16],"data_offsets":[0,18446744073709551615]}})";
  std::string hf_bytes;
  testing::append_pod<std::uint64_t>(hf_bytes, hf_header.size());
  hf_bytes += hf_header + std::string(64, '\0');
  const std::string hf = dir.file("hf");
  std::filesystem::create_directories(hf);
  testing::write_file(hf + "/config.json",
                      R"({"model_type": "llama", "hidden_size": 16, "intermediate_size": 24, "num_hidden_layers": 1,
                          "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 40,
                          "max_position_embeddings": 64, "tie_word_embeddings": true})");
  testing::write_file(hf + "/model.safetensors", hf_bytes);
  // 16k characters of prose for prompt tokenisation (was O(n^2): > 60 s).
  std::string prose;
  while (prose.size() < 16384) prose += "Once upon a time, there was a little girl named Lily. ";
  const std::string parts300k = repeat("a.", 300000) + "a";

  const std::vector<Case> cases = {
      {"crash: 300k-part table header", "validate " + file("deep.toml", model + "[" + parts300k + "]\n"), 1,
       {"deep.toml:3: a dotted key", "at most 128"}},
      {"memory: --repeats 1e9", "run " + file("small.toml", small) + " --out " + dir.file("r") + " --repeats 1000000000", 1,
       {"--repeats 1000000000 is out of range; allowed: 1 .. 1000"}},
      {"memory: sweep of 10^6 points",
       "validate " + file("sweep.toml", model + "[sweep]\n\"scheduler.max_batch\" = [" + numbers(1000) +
                                             "]\n\"kv.block_size\" = [" + numbers(1000) + "]\n"),
       1, {"[sweep] grid has more than 10000 points"}},
      {"memory: trace row of 1e9 prompt tokens",
       "validate " + file("t9.toml", model + "[workload]\ntrace = \"" +
                                         file("t9.csv", "arrival_s,prompt_tokens,output_tokens\n0,1000000000,4\n") + "\"\n"),
       1, {"t9.csv:2: prompt_tokens 1000000000 is out of range"}},
      {"memory: trace row of 1e8 prompt tokens",
       "validate " + file("t8.toml", model + "[workload]\ntrace = \"" +
                                         file("t8.csv", "arrival_s,prompt_tokens,output_tokens\n0,100000000,4\n") + "\"\n"),
       1, {"t8.csv:2:", "0 .. 1048576"}},
      {"memory: a run larger than --max-memory",
       "validate " + file("big.toml", "[model]\npreset = \"llama-3-8b\"\n") + " --max-memory 1GiB", 1,
       {"big.toml: the run needs about", "--max-memory allows 1.00 GiB"}},
      {"memory: --max-memory with a bad unit", "validate " + dir.file("small.toml") + " --max-memory 8GX", 1,
       {"--max-memory 8GX: unknown unit 'GX'", "allowed:"}},
      {"hang: 16k characters of prompt", "tokenize --model " + stories + " --tokenizer " + tok + " --file " +
                                              file("prose.txt", prose) + " --ids",
       0, {}},
      {"hang: --model names a FIFO", "generate --model " + fifo, 1, {"is a FIFO (named pipe), not a regular file"}},
      {"unclear: int4 group_size = 12",
       "validate " + file("int4.toml", small + "[baseline]\nquantization = { name = \"int4\", group_size = 12 }\n"), 1,
       {"int4.toml:8:", "group_size"}},
      {"unclear: GGUF with a wrong magic", "generate --model " + file("m.gguf", "GGUX" + std::string(60, '\0')), 1,
       {"not a GGUF file"}},
      {"unclear: /dev/zero as a model", "generate --model /dev/zero", 1, {"is a character device"}},
      {"unclear: safetensors offset 2^64-1", "generate --model " + hf, 1, {"data_offsets", "is out of range"}},
      {"unclear: tokenizer path is a directory", "generate --model " + stories + " --tokenizer " + dir.path.string(), 1,
       {"is a directory, not a regular file"}},
      {"unclear: JSONL line [1,2,3]",
       "validate " + file("a.toml", model + "[workload]\ntrace = \"" + file("a.jsonl", "[1,2,3]\n") + "\"\n"), 1,
       {"a.jsonl:1: no '{'"}},
      {"unclear: run DIRECTORY", "run " + dir.path.string(), 1, {"run --resume DIR"}},
      {"unclear: bad --set value", "validate " + dir.file("small.toml") + " --set experiment.repeats=0", 1,
       {"(--set)", "out of range [1, 1000]"}},
      {"unclear: numeric flag out of range", "run " + dir.file("small.toml") + " --repeats 99999999999", 2,
       {"allowed: an integer 1 .. 1000"}},
      {"silent: tokenizer score NaN", "generate --model " + stories + " --tokenizer " + file("nan.bin", nan_tok), 1,
       {"token 2 has score nan; allowed: a finite number"}},
      {"silent: --seed -1", "generate --model " + stories + " --seed=-1", 1, {"--seed -1 is not allowed"}},
      {"silent: shared_prefix longer than the prompt",
       "validate " + file("sp.toml", model + "[workload]\nprompt_len = 16\nshared_prefix = 32\n"), 1,
       {"shared_prefix = 32 is longer than any prompt"}},
      {"silent: trace rows with 0 tokens, unsorted",
       "run " + file("z.toml", model + "[device]\nthreads = 1\n[workload]\ntrace = \"" +
                                   file("z.csv", "arrival_s,prompt_tokens,output_tokens\n2,0,3\n1,5,0\n") + "\"\n") +
           " --out " + dir.file("rz"),
       0, {"row(s) with 0 prompt tokens", "row(s) with 0 output tokens", "arrival times are not sorted"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.klass) + ": inferlab " + c.args.substr(0, 200));
    const testing::CliResult r = testing::run_inferlab_limited(c.args, testing::kAddressSanitizer ? 0 : kAddressSpaceKiB, kSeconds);
    EXPECT_NE(r.code, 124) << "killed after " << kSeconds << " s";
    EXPECT_EQ(r.code, c.code) << r.err.substr(0, 2000);
    for (const std::string& part : c.expect)
      EXPECT_NE(r.err.find(part), std::string::npos) << "missing '" << part << "' in: " << r.err.substr(0, 2000);
    EXPECT_EQ(r.err.find("std::bad_alloc"), std::string::npos) << r.err.substr(0, 2000);
  }
}

}  // namespace
}  // namespace inferlab
