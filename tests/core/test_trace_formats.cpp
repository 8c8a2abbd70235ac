// Trace formats beyond canonical/azure/mooncake (see test_workload.cpp for those): Vidur /
// Splitwise CSV, Azure 2024 timestamps, BurstGPT with filters, canonical JSONL with priority and
// slo_class, length-only CSVs, detection from the header (format = "auto"), and what
// `inferlab trace` computes (stats, conversion to canonical). One tiny hand-written file per
// format and quirk: CRLF, no final newline, header variants, unsorted arrivals (sorted stably
// by build_workload, the documented behaviour), and a malformed row per format naming
// file:line and the expected columns.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include "inferlab/error.h"
#include "inferlab/workload/trace_tools.h"
#include "inferlab/workload/workload.h"

namespace inferlab {
namespace {

namespace fs = std::filesystem;

fs::path temp_dir() { return fs::temp_directory_path() / ("inferlab_test_trace_formats_" + std::to_string(::getpid())); }

class TempDirCleanup : public ::testing::Environment {
 public:
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(temp_dir(), ec);
  }
};
[[maybe_unused]] ::testing::Environment* const kCleanup = ::testing::AddGlobalTestEnvironment(new TempDirCleanup);

std::string write_file(const std::string& name, const std::string& content) {
  fs::create_directories(temp_dir());
  fs::path p = temp_dir() / name;
  std::ofstream(p, std::ios::binary) << content;
  return p.string();
}

// The error read_trace throws, or "" (with a test failure) when it does not throw.
std::string error_of(const std::string& path, const std::string& format, const TraceFilter& filter = {}) {
  try {
    read_trace(path, format, filter);
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << path << " (" << format << ") was accepted";
  return "";
}

void expect_has(const std::string& text, const std::string& part) {
  EXPECT_NE(text.find(part), std::string::npos) << "'" << part << "' not in: " << text;
}

TEST(TraceFormats, VidurCsvCrlfExtraColumnsNoFinalNewline) {
  // Splitwise/Vidur traces carry more columns than the three used, in any order.
  const std::string path = write_file("vidur.csv",
                                      "num_decode_tokens,arrived_at,num_prefill_tokens,num_total_tokens\r\n"
                                      "20,0.5,100,120\r\n"
                                      "7,0.25,30,37\r\n"
                                      "9,1.75,60,69");
  EXPECT_EQ(detect_trace_format(path), "vidur");
  auto rows = read_trace(path, "auto");
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_DOUBLE_EQ(rows[0].arrival_s, 0.5);
  EXPECT_EQ(rows[0].prompt_tokens, 100);
  EXPECT_EQ(rows[0].output_tokens, 20);
  // Unsorted arrivals: build_workload sorts them stably and starts the first at 0.
  WorkloadSpec spec;
  spec.trace = path;
  auto reqs = build_workload(spec, 64);
  ASSERT_EQ(reqs.size(), 3u);
  EXPECT_EQ(reqs[0].max_output, 7);
  EXPECT_DOUBLE_EQ(reqs[0].arrival_s, 0.0);
  EXPECT_DOUBLE_EQ(reqs[1].arrival_s, 0.25);
  EXPECT_DOUBLE_EQ(reqs[2].arrival_s, 1.5);
}

TEST(TraceFormats, VidurMalformedRowNamesFileLineAndColumns) {
  const std::string path = write_file("vidur_bad.csv", "arrived_at,num_prefill_tokens,num_decode_tokens\n0,10,5\n1,ten,5\n");
  const std::string e = error_of(path, "vidur");
  expect_has(e, path + ":3:");
  expect_has(e, "num_prefill_tokens 'ten'");
  const std::string missing = error_of(write_file("vidur_nocol.csv", "arrived_at,num_prefill_tokens\n0,1\n"), "vidur");
  expect_has(missing, ":1:");
  expect_has(missing, "arrived_at,num_prefill_tokens,num_decode_tokens");
}

TEST(TraceFormats, LengthOnlyCsvIsNotATraceButALengthsFile) {
  const std::string path = write_file("sharegpt_like.csv",
                                      "num_prefill_tokens,num_decode_tokens,num_total_tokens,pd_ratio\n"
                                      "100,20,120,5.0\n300,10,310,30.0\n");
  const std::string e = error_of(path, "auto");
  expect_has(e, path + ":1:");
  expect_has(e, "lengths_file");
  // As a lengths file with synthetic arrivals it is fine.
  WorkloadSpec spec;
  spec.num_requests = 6;
  spec.arrival = "poisson";
  spec.rate = 2.0;
  spec.prompt_len.dist = spec.output_len.dist = "trace";
  spec.lengths_file = path;
  for (const Request& r : build_workload(spec, 64))
    EXPECT_TRUE((r.prompt.size() == 100 && r.max_output == 20) || (r.prompt.size() == 300 && r.max_output == 10));
}

TEST(TraceFormats, Azure2024OffsetsAndVaryingFractionDigits) {
  // 2024 traces: a UTC offset and however many fractional digits the writer kept.
  const std::string path = write_file("azure2024.csv",
                                      "TIMESTAMP,ContextTokens,GeneratedTokens\n"
                                      "2024-05-10 00:00:00.009930+00:00,4808,10\n"
                                      "2024-05-10 00:00:01+00:00,3180,8\n"
                                      "2024-05-10 01:00:02.5+01:00,110,27\n"
                                      "2024-05-10 00:00:00.1Z,50,3\n");
  EXPECT_EQ(detect_trace_format(path), "azure");
  auto rows = read_trace(path, "auto");
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_NEAR(rows[1].arrival_s, 1.0 - 0.00993, 1e-9);
  EXPECT_NEAR(rows[2].arrival_s, 2.5 - 0.00993, 1e-9);  // 01:00 at +01:00 is 00:00 UTC
  EXPECT_NEAR(rows[3].arrival_s, 0.1 - 0.00993, 1e-9);  // earlier than row 2: sorted later
  const std::string e = error_of(write_file("azure_bad.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n"
                                                             "2024-05-10 00:00:00+00:00,1,1\n2024-05-10 25:00:00,1,1\n"),
                                 "auto");
  expect_has(e, ":3:");
  expect_has(e, "YYYY-MM-DD HH:MM:SS[.fraction]");
}

TEST(TraceFormats, BurstGptColumnsAndFilters) {
  const std::string path = write_file("burstgpt.csv",
                                      "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\r\n"
                                      "5,ChatGPT,472,18,490,Conversation log\r\n"
                                      "45,ChatGPT,1087,0,1087,API log\r\n"
                                      "118,GPT-4,417,276,693,Conversation log\r\n"
                                      "120,ChatGPT,100,50,150,Conversation log");
  EXPECT_EQ(detect_trace_format(path), "burstgpt");
  EXPECT_EQ(read_trace(path, "auto").size(), 4u);
  auto chat = read_trace(path, "burstgpt", {"ChatGPT", "Conversation log"});
  ASSERT_EQ(chat.size(), 2u);
  EXPECT_DOUBLE_EQ(chat[1].arrival_s, 120.0);
  EXPECT_EQ(chat[1].prompt_tokens, 100);
  EXPECT_EQ(read_trace(path, "burstgpt", {"GPT-4", ""}).size(), 1u);
  expect_has(error_of(path, "burstgpt", {"Llama", ""}), "no rows match model = \"Llama\"");
  const std::string e = error_of(write_file("burst_bad.csv", "Timestamp,Model,Request tokens,Response tokens\n"
                                                             "1,ChatGPT,10,5\n2,ChatGPT,10\n"),
                                 "burstgpt");
  expect_has(e, ":3:");
  expect_has(e, "one comma-separated value per header column");
  expect_has(error_of(write_file("burst_nocol.csv", "Timestamp,Model,Request tokens\n1,a,2\n"), "burstgpt"),
             "Timestamp,Model,Request tokens,Response tokens");
}

TEST(TraceFormats, CanonicalJsonlPriorityAndSloClass) {
  const std::string path = write_file("canon_classes.jsonl",
                                      "{\"arrival_s\": 0.2, \"prompt_tokens\": 10, \"output_tokens\": 4, \"priority\": 1}\n"
                                      "{\"arrival_s\": 0.0, \"prompt_tokens\": 12, \"output_tokens\": 3, \"priority\": 0, "
                                      "\"slo_class\": 2}");
  EXPECT_EQ(detect_trace_format(path), "canonical");
  WorkloadSpec spec;
  spec.trace = path;
  auto reqs = build_workload(spec, 64);
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_EQ(reqs[0].priority, 0);
  EXPECT_EQ(reqs[0].slo_class, 2);
  EXPECT_EQ(reqs[1].priority, 1);
  EXPECT_EQ(reqs[1].slo_class, 1);  // defaults to the priority
  const std::string e =
      error_of(write_file("canon_bad.jsonl", "{\"arrival_s\": 0, \"prompt_tokens\": 1, \"output_tokens\": 1}\n"
                                             "{\"arrival_s\": 1, \"prompt_tokens\": 1, \"output_tokens\": 1, \"slo_class\": \"gold\"}\n"),
               "auto");
  expect_has(e, ":2:");
  expect_has(e, "integer");
}

TEST(TraceFormats, ClassMixDrawsSeededClasses) {
  WorkloadSpec spec;
  spec.num_requests = 400;
  spec.class_mix = {0.25, 0.75};
  auto a = build_workload(spec, 64), b = build_workload(spec, 64);
  int urgent = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].priority, b[i].priority);
    EXPECT_EQ(a[i].priority, a[i].slo_class);
    urgent += a[i].priority == 0;
  }
  EXPECT_GT(urgent, 70);
  EXPECT_LT(urgent, 130);
}

TEST(TraceFormats, UnknownHeaderAndForcedFormat) {
  const std::string odd = write_file("odd.csv", "when,in,out\n1,2,3\n");
  const std::string e = error_of(odd, "auto");
  expect_has(e, odd + ":1: unrecognised header");
  expect_has(e, "arrived_at,num_prefill_tokens,num_decode_tokens (vidur)");
  // Forcing a format reads the file as that format: the azure header lacks vidur's columns.
  const std::string azure = write_file("azure_forced.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n2024-01-01 00:00:00,1,1\n");
  expect_has(error_of(azure, "vidur"), "header lacks column 'arrived_at'");
  expect_has(error_of(azure, "sharegpt"), "expected auto, canonical, azure, mooncake, vidur, burstgpt");
}

TEST(TraceTools, StatsOfAHandMadeTrace) {
  std::vector<TraceRow> rows(5);
  const double arrivals[] = {3.0, 0.0, 1.0, 2.0, 7.0};  // gaps 1,1,1,4 once sorted
  for (int i = 0; i < 5; ++i) {
    rows[i].arrival_s = arrivals[i];
    rows[i].prompt_tokens = 10 * (i + 1);
    rows[i].output_tokens = i + 1;
  }
  rows[1].prefix_blocks = {1, 2};     // arrives first: two new blocks
  rows[2].prefix_blocks = {1, 2, 3};  // two repeats, one new
  rows[3].prefix_blocks = {1, 9};     // one repeat, one new
  TraceStats s = trace_stats(rows);
  EXPECT_EQ(s.count, 5);
  EXPECT_DOUBLE_EQ(s.duration_s, 7.0);
  EXPECT_DOUBLE_EQ(s.rate_req_s, 4.0 / 7.0);
  // gaps {1,1,1,4}: mean 1.75, population sd sqrt(((.75^2)*3 + 2.25^2)/4)
  EXPECT_NEAR(s.gap_cv, std::sqrt((3 * 0.5625 + 5.0625) / 4) / 1.75, 1e-12);
  EXPECT_DOUBLE_EQ(s.prompt_p50, 30.0);
  EXPECT_DOUBLE_EQ(s.output_p90, 4.6);
  EXPECT_DOUBLE_EQ(s.prefix_share_frac, 3.0 / 7.0);
  rows[1].prefix_blocks.clear(), rows[2].prefix_blocks.clear(), rows[3].prefix_blocks.clear();
  EXPECT_EQ(trace_stats(rows).prefix_share_frac, -1);
  expect_has(format_trace_stats(trace_stats(rows)), "prefix_share_frac n/a");
}

TEST(TraceTools, ConvertToCanonicalRoundTrips) {
  const std::string path = write_file("vidur_round.csv", "arrived_at,num_prefill_tokens,num_decode_tokens\n"
                                                         "10.5,100,20\n10.25,30,7\n");
  const std::string csv = to_canonical_csv(read_trace(path, "auto"));
  EXPECT_EQ(csv, "arrival_s,prompt_tokens,output_tokens,priority,slo_class,prefix_blocks\n0,30,7,0,0,\n0.25,100,20,0,0,\n");
  auto back = read_trace(write_file("round.csv", csv), "auto");
  ASSERT_EQ(back.size(), 2u);
  EXPECT_DOUBLE_EQ(back[1].arrival_s, 0.25);
  EXPECT_EQ(back[1].prompt_tokens, 100);
  EXPECT_EQ(back[0].slo_class, 0);
}

}  // namespace
}  // namespace inferlab
