// Workload: seeded synthetic arrivals and lengths, trace readers (small files written here and
// the real shared traces), and the error messages of malformed rows.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include <unistd.h>

#include "inferlab/error.h"
#include "inferlab/workload/workload.h"
#include "test_support.h"

namespace inferlab {
namespace {

namespace fs = std::filesystem;

fs::path temp_dir() {
  return fs::temp_directory_path() / ("inferlab_test_workload_" + std::to_string(::getpid()));
}

// Removes the files the tests wrote once the run ends.
class TempDirCleanup : public ::testing::Environment {
 public:
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(temp_dir(), ec);
  }
};
[[maybe_unused]] ::testing::Environment* const kCleanup =
    ::testing::AddGlobalTestEnvironment(new TempDirCleanup);

// A file under a per-process temporary folder, written byte for byte.
std::string write_file(const std::string& name, const std::string& content) {
  fs::path dir = temp_dir();
  fs::create_directories(dir);
  fs::path p = dir / name;
  std::ofstream(p, std::ios::binary) << content;
  return p.string();
}

std::vector<double> gaps(const std::vector<Request>& reqs) {
  std::vector<double> g;
  for (std::size_t i = 1; i < reqs.size(); ++i) g.push_back(reqs[i].arrival_s - reqs[i - 1].arrival_s);
  return g;
}

double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s / static_cast<double>(v.size());
}

double cv(const std::vector<double>& v) {
  const double m = mean(v);
  double ss = 0;
  for (double x : v) ss += (x - m) * (x - m);
  return std::sqrt(ss / static_cast<double>(v.size() - 1)) / m;
}

WorkloadSpec synthetic(int n, const std::string& arrival, double rate = 4.0) {
  WorkloadSpec s;
  s.num_requests = n;
  s.arrival = arrival;
  s.rate = rate;
  s.prompt_len.dist = "fixed";
  s.prompt_len.value = 1;
  s.output_len.dist = "fixed";
  s.output_len.value = 1;
  s.seed = 7;
  return s;
}

TEST(Workload, SameSeedSameRequestsOtherSeedOther) {
  WorkloadSpec s = synthetic(50, "poisson");
  s.prompt_len = {"uniform", 0, 4, 40};
  s.output_len = {"lognormal", 0, 1, 500, 30.0, 0.8};
  auto a = build_workload(s, 1000), b = build_workload(s, 1000);
  ASSERT_EQ(a.size(), 50u);
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].id, static_cast<int>(i));
    EXPECT_EQ(a[i].arrival_s, b[i].arrival_s);
    EXPECT_EQ(a[i].prompt, b[i].prompt);
    EXPECT_EQ(a[i].max_output, b[i].max_output);
  }
  s.seed = 8;
  auto c = build_workload(s, 1000);
  int same_arrival = 0, same_prompt = 0;
  for (std::size_t i = 1; i < a.size(); ++i) {
    same_arrival += a[i].arrival_s == c[i].arrival_s;
    same_prompt += a[i].prompt == c[i].prompt;
  }
  EXPECT_EQ(same_arrival, 0);
  EXPECT_EQ(same_prompt, 0);
}

TEST(Workload, AllAtOnceAndPromptIdRange) {
  WorkloadSpec s = synthetic(20, "all_at_once");
  s.prompt_len.value = 50;
  s.output_len.value = 9;
  auto r = build_workload(s, 10);
  ASSERT_EQ(r.size(), 20u);
  std::set<int> ids;
  for (const Request& q : r) {
    EXPECT_EQ(q.arrival_s, 0.0);
    EXPECT_EQ(q.prompt.size(), 50u);
    EXPECT_EQ(q.max_output, 9);
    ids.insert(q.prompt.begin(), q.prompt.end());
  }
  EXPECT_EQ(*ids.begin(), 3);   // 0..2 are special and never drawn
  EXPECT_EQ(*ids.rbegin(), 9);  // vocab 10: up to 9
  EXPECT_EQ(ids.size(), 7u);
}

TEST(Workload, PoissonMeanGapIsOneOverRate) {
  auto r = build_workload(synthetic(20001, "poisson", 5.0), 100);
  EXPECT_EQ(r.front().arrival_s, 0.0);  // first arrival shifted to 0
  auto g = gaps(r);
  ASSERT_EQ(g.size(), 20000u);
  EXPECT_GE(*std::min_element(g.begin(), g.end()), 0.0);
  EXPECT_NEAR(mean(g), 0.2, 0.2 * 0.03);
  EXPECT_NEAR(cv(g), 1.0, 0.03);  // exponential gaps: CV 1
}

TEST(Workload, GammaGapsHaveMeanOneOverRateAndCvBurstiness) {
  // Sampling error of the CV grows with burstiness (the gaps' kurtosis is 6 b^2), hence the
  // larger sample and tolerance at b = 4.
  for (double b : {0.5, 1.0, 2.0, 4.0}) {
    WorkloadSpec s = synthetic(b >= 4 ? 100001 : 20001, "gamma", 2.0);
    s.burstiness = b;
    auto g = gaps(build_workload(s, 100));
    EXPECT_NEAR(mean(g), 0.5, 0.5 * (b >= 2 ? 0.06 : 0.03)) << "burstiness " << b;
    EXPECT_NEAR(cv(g), b, b * (b >= 4 ? 0.10 : 0.05)) << "burstiness " << b;
  }
}

TEST(Workload, LognormalMeanAndClipping) {
  WorkloadSpec s = synthetic(20000, "all_at_once");
  s.prompt_len = {"lognormal", 0, 1, 1 << 20, 100.0, 0.5};
  auto r = build_workload(s, 100);
  std::vector<double> len;
  for (const Request& q : r) len.push_back(static_cast<double>(q.prompt.size()));
  EXPECT_NEAR(mean(len), 100.0, 2.0);  // standard error ~0.4
  EXPECT_NEAR(cv(len), std::sqrt(std::exp(0.25) - 1.0), 0.02);

  s.prompt_len.min = 80;
  s.prompt_len.max = 120;
  r = build_workload(s, 100);
  int at_min = 0, at_max = 0;
  for (const Request& q : r) {
    const int n = static_cast<int>(q.prompt.size());
    ASSERT_GE(n, 80);
    ASSERT_LE(n, 120);
    at_min += n == 80;
    at_max += n == 120;
  }
  // P(x < 79.5) and P(x > 120.5) are each about a quarter of the draws.
  EXPECT_GT(at_min, 2000);
  EXPECT_GT(at_max, 2000);
}

TEST(Workload, UniformCoversItsInclusiveRange) {
  WorkloadSpec s = synthetic(2000, "all_at_once");
  s.output_len = {"uniform", 0, 5, 9};
  std::set<int> seen;
  for (const Request& q : build_workload(s, 100)) seen.insert(q.max_output);
  EXPECT_EQ(seen, (std::set<int>{5, 6, 7, 8, 9}));
}

TEST(Workload, LimitTimeScaleAndClips) {
  WorkloadSpec s = synthetic(100, "poisson", 1.0);
  s.prompt_len.value = 30;
  s.output_len.value = 20;
  auto full = build_workload(s, 100);
  s.limit = 10;
  s.time_scale = 0.5;
  s.max_prompt = 8;
  s.max_output = 5;
  auto r = build_workload(s, 100);
  ASSERT_EQ(r.size(), 10u);
  for (std::size_t i = 0; i < r.size(); ++i) {
    EXPECT_DOUBLE_EQ(r[i].arrival_s, full[i].arrival_s * 0.5);
    EXPECT_EQ(r[i].prompt.size(), 8u);
    EXPECT_EQ(r[i].max_output, 5);
    // Clipping truncates: the kept tokens are the unclipped prompt's first ones.
    EXPECT_TRUE(std::equal(r[i].prompt.begin(), r[i].prompt.end(), full[i].prompt.begin()));
  }
  EXPECT_GT(r.back().arrival_s, 0.0);
}

TEST(Workload, LengthsFromFileComeAsPairs) {
  const std::string path = write_file("lengths.csv",
                                      "num_prefill_tokens,num_decode_tokens,num_total_tokens,pd_ratio\n"
                                      "10,100,110,0.1\n20,200,220,0.1\n30,300,330,0.1\n");
  WorkloadSpec s = synthetic(300, "all_at_once");
  s.prompt_len.dist = "trace";
  s.output_len.dist = "trace";
  s.lengths_file = path;
  std::set<int> prompts;
  for (const Request& q : build_workload(s, 100)) {
    EXPECT_EQ(q.max_output, static_cast<int>(q.prompt.size()) * 10);
    prompts.insert(static_cast<int>(q.prompt.size()));
  }
  EXPECT_EQ(prompts, (std::set<int>{10, 20, 30}));
  s.lengths_file.clear();
  EXPECT_THROW(build_workload(s, 100), Error);
}

TEST(Workload, BadSpecsThrow) {
  WorkloadSpec s = synthetic(4, "weekly");
  EXPECT_THROW(build_workload(s, 100), Error);
  s = synthetic(4, "poisson", 0.0);
  EXPECT_THROW(build_workload(s, 100), Error);
  s = synthetic(4, "gamma");
  s.burstiness = 0;
  EXPECT_THROW(build_workload(s, 100), Error);
  s = synthetic(4, "all_at_once");
  s.prompt_len = {"uniform", 0, 9, 5};
  EXPECT_THROW(build_workload(s, 100), Error);
  s.prompt_len = {"zipf"};
  EXPECT_THROW(build_workload(s, 100), Error);
  EXPECT_THROW(build_workload(synthetic(4, "all_at_once"), 3), Error);
}

// ---- trace readers ------------------------------------------------------------------------

TEST(Trace, CanonicalCsvAnyColumnOrderSortedStably) {
  const std::string path = write_file("canon.csv",
                                      "output_tokens,priority,arrival_s,prompt_tokens\n"
                                      "5,1,2.5,10\n"
                                      "6,0,1.5,11\n"
                                      "7,2,2.5,12\n"
                                      "0,0,4.0,0\n");
  auto rows = read_trace(path, "canonical");
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[0].arrival_s, 2.5);
  EXPECT_EQ(rows[0].prompt_tokens, 10);
  EXPECT_EQ(rows[0].output_tokens, 5);
  EXPECT_EQ(rows[0].priority, 1);

  WorkloadSpec s;
  s.trace = path;
  auto r = build_workload(s, 100);
  ASSERT_EQ(r.size(), 4u);
  // Arrival order 1.5, 2.5 (first in file), 2.5, 4.0, shifted so the first is 0.
  EXPECT_EQ(r[0].arrival_s, 0.0);
  EXPECT_EQ(r[0].prompt.size(), 11u);
  EXPECT_EQ(r[1].arrival_s, 1.0);
  EXPECT_EQ(r[1].prompt.size(), 10u);
  EXPECT_EQ(r[1].priority, 1);
  EXPECT_EQ(r[2].prompt.size(), 12u);
  EXPECT_EQ(r[2].priority, 2);
  EXPECT_EQ(r[3].arrival_s, 2.5);
  EXPECT_EQ(r[3].prompt.size(), 1u);  // 0 tokens clipped up to 1
  EXPECT_EQ(r[3].max_output, 1);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(r[i].id, i);
}

TEST(Trace, CanonicalJsonlWithSharedPrefixBlocks) {
  const std::string path = write_file("canon.jsonl",
                                      "{\"arrival_s\": 0.0, \"prompt_tokens\": 10, \"output_tokens\": 3, "
                                      "\"prefix_blocks\": [7, 8, 9], \"note\": \"a, }\"}\n"
                                      "\n"
                                      "{\"prompt_tokens\":9,\"output_tokens\":4,\"arrival_s\":0.25,"
                                      "\"prefix_blocks\":[7,8,5],\"priority\":3}\n");
  auto rows = read_trace(path, "canonical");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].prefix_blocks, (std::vector<std::uint64_t>{7, 8, 9}));
  EXPECT_EQ(rows[1].arrival_s, 0.25);
  EXPECT_EQ(rows[1].priority, 3);

  WorkloadSpec s;
  s.trace = path;
  s.prefix_block_tokens = 4;
  s.seed = 3;
  auto r = build_workload(s, 1000);
  ASSERT_EQ(r.size(), 2u);
  // Blocks 7 and 8 are shared: the first 8 prompt tokens agree, the third block differs.
  EXPECT_TRUE(std::equal(r[0].prompt.begin(), r[0].prompt.begin() + 8, r[1].prompt.begin()));
  EXPECT_FALSE(std::equal(r[0].prompt.begin() + 8, r[0].prompt.begin() + 9, r[1].prompt.begin() + 8));
  // Clipping the prompt to 5 tokens keeps the blocks that still cover tokens.
  s.max_prompt = 5;
  r = build_workload(s, 1000);
  EXPECT_EQ(r[0].prefix_blocks, (std::vector<std::uint64_t>{7, 8}));
}

TEST(Trace, AzureCrlfWithoutFinalNewline) {
  const std::string path = write_file("azure.csv",
                                      "TIMESTAMP,ContextTokens,GeneratedTokens\r\n"
                                      "2023-11-16 18:15:46.6805900,374,44\r\n"
                                      "2023-11-16 18:15:50.9951690,396,109\r\n"
                                      "2023-11-16 23:59:59.5000000,5,0\r\n"
                                      "2023-11-17 00:00:00.2500000,6,7");
  auto rows = read_trace(path, "azure");
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[0].arrival_s, 0.0);
  EXPECT_EQ(rows[0].prompt_tokens, 374);
  EXPECT_EQ(rows[0].output_tokens, 44);
  EXPECT_NEAR(rows[1].arrival_s, 4.3145790, 1e-9);
  EXPECT_NEAR(rows[2].arrival_s, 20652.8194100, 1e-9);  // 5h 44m 12.81941s later
  EXPECT_NEAR(rows[3].arrival_s, 20653.5694100, 1e-9);  // across midnight
  EXPECT_EQ(rows[3].output_tokens, 7);
}

TEST(Trace, MooncakeMillisecondsAndHashIds) {
  const std::string path = write_file("mooncake.jsonl",
                                      "{\"timestamp\": 0, \"input_length\": 1030, \"output_length\": 5, "
                                      "\"hash_ids\": [0, 1, 2]}\n"
                                      "{\"timestamp\": 1500, \"input_length\": 600, \"output_length\": 9, "
                                      "\"hash_ids\": [0, 3]}\n");
  auto rows = read_trace(path, "mooncake");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[1].arrival_s, 1.5);
  EXPECT_EQ(rows[0].prompt_tokens, 1030);
  EXPECT_EQ(rows[1].output_tokens, 9);
  EXPECT_EQ(rows[1].prefix_blocks, (std::vector<std::uint64_t>{0, 3}));
  WorkloadSpec s;
  s.trace = path;
  s.format = "mooncake";
  auto r = build_workload(s, 32000);
  // 512-token block 0 is shared; block 1 vs 3 differ.
  EXPECT_TRUE(std::equal(r[0].prompt.begin(), r[0].prompt.begin() + 512, r[1].prompt.begin()));
  EXPECT_NE(std::vector<int>(r[0].prompt.begin() + 512, r[0].prompt.begin() + 600),
            std::vector<int>(r[1].prompt.begin() + 512, r[1].prompt.end()));
}

TEST(Trace, RealAzureConversationTrace) {
  const std::string path = testing::data_path("traces/AzureLLMInferenceTrace_conv.csv");
  INFERLAB_REQUIRE_FILE(path);
  auto rows = read_trace(path, "azure");
  ASSERT_EQ(rows.size(), 19366u);
  EXPECT_EQ(rows.front().prompt_tokens, 374);
  EXPECT_EQ(rows.front().output_tokens, 44);
  EXPECT_EQ(rows.back().prompt_tokens, 197);
  EXPECT_EQ(rows.back().output_tokens, 183);
  // 19:14:08.4025270 - 18:15:46.6805900
  EXPECT_NEAR(rows.back().arrival_s, 3501.7219370, 1e-6);
  for (std::size_t i = 1; i < rows.size(); ++i) ASSERT_GE(rows[i].arrival_s, rows[i - 1].arrival_s);
}

TEST(Trace, RealMooncakeConversationTrace) {
  const std::string path = testing::data_path("traces/conversation_trace.jsonl");
  INFERLAB_REQUIRE_FILE(path);
  auto rows = read_trace(path, "mooncake");
  ASSERT_EQ(rows.size(), 12031u);
  EXPECT_EQ(rows[0].arrival_s, 0.0);
  EXPECT_EQ(rows[0].prompt_tokens, 6758);
  EXPECT_EQ(rows[0].output_tokens, 500);
  ASSERT_EQ(rows[0].prefix_blocks.size(), 14u);
  EXPECT_EQ(rows[0].prefix_blocks[13], 13u);
  EXPECT_EQ(rows[1].prefix_blocks[0], 0u);  // shared first block
  EXPECT_EQ(rows[1].prefix_blocks[1], 14u);
  for (const TraceRow& r : rows)  // one hash per (possibly partial) 512-token block
    ASSERT_EQ(r.prefix_blocks.size(), static_cast<std::size_t>((r.prompt_tokens + 511) / 512));
}

TEST(Trace, RealShareGptLengths) {
  const std::string path = testing::data_path("traces/sharegpt_8k_filtered_stats_llama2_tokenizer.csv");
  INFERLAB_REQUIRE_FILE(path);
  auto rows = read_lengths_file(path);
  ASSERT_EQ(rows.size(), 30731u);
  EXPECT_EQ(rows[0].prompt_tokens, 74);
  EXPECT_EQ(rows[0].output_tokens, 918);
}

// Every malformed input names the file and the line.
struct BadCase {
  std::string name, format, content;
  int line;
  std::string what;
};

TEST(Trace, MalformedRowsNamePathAndLine) {
  const std::vector<BadCase> cases = {
      {"empty.csv", "canonical", "", 1, "empty file"},
      {"blank.csv", "canonical", "\n\n", 1, "empty file"},
      {"header_only.csv", "canonical", "arrival_s,prompt_tokens,output_tokens\n", 1, "no rows"},
      {"no_column.csv", "canonical", "arrival_s,prompt_tokens\n0,1\n", 1, "output_tokens"},
      {"short_row.csv", "canonical", "arrival_s,prompt_tokens,output_tokens\n0,1,2\n1,2\n", 3, "2 fields"},
      {"nan.csv", "canonical", "arrival_s,prompt_tokens,output_tokens\n0,x1,2\n", 2, "prompt_tokens 'x1'"},
      {"negative.csv", "canonical", "arrival_s,prompt_tokens,output_tokens\n0,1,2\n\n1,2,-3\n", 4,
       "output_tokens -3"},
      {"neg_arrival.csv", "canonical", "arrival_s,prompt_tokens,output_tokens\n-1,1,2\n", 2, "negative"},
      {"frac.csv", "canonical", "arrival_s,prompt_tokens,output_tokens\n0,1.5,2\n", 2, "not an integer"},
      {"missing_key.jsonl", "canonical", "{\"arrival_s\": 0, \"prompt_tokens\": 3, \"output_tokens\": 1}\n"
                                         "{\"arrival_s\": 1, \"prompt_tokens\": 3}\n", 2, "output_tokens"},
      {"bad_blocks.jsonl", "canonical",
       "{\"arrival_s\": 0, \"prompt_tokens\": 3, \"output_tokens\": 1, \"prefix_blocks\": [1, -2]}\n", 1, "-2"},
      {"azure_ts.csv", "azure", "TIMESTAMP,ContextTokens,GeneratedTokens\r\n2023-11-16 18:15:46.1,3,4\r\n"
                                "2023-13-16 18:15:46.1,3,4", 3, "TIMESTAMP"},
      {"azure_cols.csv", "azure", "Time,ContextTokens,GeneratedTokens\r\n2023-11-16 18:15:46.1,3,4", 1,
       "TIMESTAMP"},
      {"azure_num.csv", "azure", "TIMESTAMP,ContextTokens,GeneratedTokens\r\n2023-11-16 18:15:46.1,3,four", 2,
       "GeneratedTokens"},
      {"moon_key.jsonl", "mooncake", "{\"timestamp\": 0, \"input_length\": 3}\n", 1, "output_length"},
      {"moon_num.jsonl", "mooncake",
       "{\"timestamp\": 0, \"input_length\": 3, \"output_length\": 1}\n"
       "{\"timestamp\": \"soon\", \"input_length\": 3, \"output_length\": 1}\n", 2, "timestamp"},
      {"moon_json.jsonl", "mooncake", "{\"timestamp\": 0, \"input_length\": 3, \"output_length\": 1\n", 1,
       "JSON object"},
      {"moon_hash.jsonl", "mooncake",
       "{\"timestamp\": 0, \"input_length\": 3, \"output_length\": 1, \"hash_ids\": 4}\n", 1, "hash_ids"},
      {"moon_empty.jsonl", "mooncake", "", 1, "empty file"},
  };
  for (const BadCase& c : cases) {
    const std::string path = write_file(c.name, c.content);
    try {
      read_trace(path, c.format);
      ADD_FAILURE() << c.name << ": no error";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(path + ":" + std::to_string(c.line) + ": "), std::string::npos) << c.name << ": " << msg;
      EXPECT_NE(msg.find(c.what), std::string::npos) << c.name << ": " << msg;
      EXPECT_NE(msg.find("; expected "), std::string::npos) << c.name << ": " << msg;
    }
  }
}

TEST(Trace, UnknownFormatAndMissingFile) {
  const std::string path = write_file("fine.csv", "arrival_s,prompt_tokens,output_tokens\n0,1,1\n");
  try {
    read_trace(path, "vidur-ish");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("auto, canonical, azure, mooncake, vidur, burstgpt"), std::string::npos) << e.what();
  }
  EXPECT_THROW(read_trace(path + ".absent", "canonical"), Error);
}

}  // namespace
}  // namespace inferlab
