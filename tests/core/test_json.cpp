// The core's JSON layer over Boost.JSON (core/src/formats/json.h, json_line.h): parse errors
// name the file, line, column and the problem in words; typed getters name the key; a JSON-lines
// reader keeps each value's text as written. And through the readers that use it: a trace line,
// tokenizer.json and manifest.json read back.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "core/src/formats/json.h"
#include "core/src/formats/json_line.h"
#include "format_writers.h"
#include "inferlab/error.h"
#include "inferlab/formats/formats.h"
#include "inferlab/results/manifest.h"
#include "inferlab/run/shard.h"
#include "inferlab/workload/workload.h"

namespace inferlab {
namespace {

using formats::JsonLineReader;
using formats::json_int;
using formats::parse_json;

std::string parse_error(const std::string& text) {
  try {
    parse_json(text, "doc.json");
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "accepted: " << text;
  return "";
}

#define EXPECT_HAS(text, part) EXPECT_NE((text).find(part), std::string::npos) << "'" << (part) << "' not in: " << (text)

TEST(Json, ParseErrorsNameFileLineColumnAndProblem) {
  EXPECT_EQ(parse_error("{\n  \"a\": 1,\n  \"b\": ]\n}"), "doc.json: invalid JSON: unexpected character ']' at line 3:8");
  EXPECT_EQ(parse_error("{\"a\": 1"), "doc.json: invalid JSON: unexpected end of text at line 1:8");
  EXPECT_EQ(parse_error("{} {}"), "doc.json: invalid JSON: unexpected data after the JSON value at line 1:4");
  EXPECT_HAS(parse_error("[\"\\q\"]"), "doc.json: invalid JSON: an unknown escape '\\q' in a string");
  EXPECT_HAS(parse_error("[\"\\u12G4\"]"), "a \\u escape without 4 hex digits (\\u12G4) at line 1:7");
  EXPECT_HAS(parse_error("[\"\\ud800\"]"), "a \\u escape of a lone UTF-16 surrogate");
  EXPECT_HAS(parse_error("[\"a\tb\"]"), "a raw control character (0x09)");
  EXPECT_HAS(parse_error("[\"\xff\"]"), "a byte that is not UTF-8 (0xFF) at line 1:3");
  EXPECT_HAS(parse_error(""), "unexpected end of text at line 1:1");
  EXPECT_HAS(parse_error("[01]"), "unexpected character '1' at line 1:3");
}

TEST(Json, NestingLimitAndRepeatedKeys) {
  const std::size_t n = formats::kJsonMaxDepth;
  EXPECT_NO_THROW(parse_json(std::string(n, '[') + std::string(n, ']'), "deep.json"));
  EXPECT_HAS(parse_error(std::string(n + 1, '[') + std::string(n + 1, ']')), "nesting deeper than 256");
  // A key given twice keeps its last value (as Python's json, which writes HF files, reads it).
  const formats::json::value v = parse_json("{\"a\": 1, \"a\": 2}", "dup.json");
  EXPECT_EQ(json_int(*formats::json_find(v, "a"), "a"), 2);
}

TEST(Json, TypedGettersNameTheValue) {
  auto error = [](const char* text, auto get) {
    try {
      get(parse_json(text, "x.json"));
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  auto as_int = [](const formats::json::value& v) { return json_int(v, "x.json: 'n'"); };
  EXPECT_EQ(json_int(parse_json("3.0", "x"), "n"), 3);
  EXPECT_EQ(json_int(parse_json("-9000000000000000", "x"), "n"), -9'000'000'000'000'000LL);
  EXPECT_EQ(error("3.5", as_int), "x.json: 'n' must be an integer");
  EXPECT_EQ(error("\"3\"", as_int), "x.json: 'n' must be an integer");
  EXPECT_EQ(error("18446744073709551615", as_int),
            "x.json: 'n' = 18446744073709551615 is out of range; allowed: an integer of magnitude at most 9e15");
  EXPECT_HAS(error("1e16", as_int), "is out of range");
  EXPECT_EQ(error("1", [](const formats::json::value& v) { return formats::json_string(v, "x.json: 's'"); }),
            "x.json: 's' must be a string");
  EXPECT_EQ(error("[]", [](const formats::json::value& v) { return formats::json_bool(v, "x.json: 'b'"); }),
            "x.json: 'b' must be true or false");
}

TEST(JsonLine, KeepsTopLevelMembersAsWritten) {
  JsonLineReader r;
  std::string problem;
  std::size_t column = 0;
  ASSERT_TRUE(r.parse(" {\"t\": 1e300, \"s\": \"a\\\"b\", \"l\": [1, -2, \"x\", [3], {\"y\": 4}], "
                      "\"o\": {\"t\": 5, \"l\": [6]}, \"k\\u0065y\": true, \"t\": 2.50} ",
                      &problem, &column))
      << problem;
  EXPECT_EQ(r.find("t")->text, "2.50");  // the last of a repeated key
  EXPECT_EQ(r.find("s")->text, "\"a\"b\"");
  const JsonLineReader::Member* l = r.find("l");
  ASSERT_TRUE(l && l->is_array);
  EXPECT_EQ(l->text, "[...]");
  EXPECT_EQ(l->elements, (std::vector<std::string_view>{"1", "-2", "\"x\"", "[...]", "{...}"}));
  EXPECT_EQ(r.find("o")->text, "{...}");
  EXPECT_FALSE(r.find("o")->is_array);
  EXPECT_EQ(r.find("key")->text, "true");  // escapes in keys are resolved
  EXPECT_EQ(r.find("y"), nullptr);         // nested members are not top-level ones

  ASSERT_TRUE(r.parse("{}", &problem, &column));
  EXPECT_EQ(r.find("t"), nullptr);  // nothing left over from the previous line

  EXPECT_FALSE(r.parse("  [1]", &problem, &column));
  EXPECT_EQ(problem, "no '{'");
  EXPECT_EQ(column, 3u);
  EXPECT_FALSE(r.parse("{\"a\": 1} {", &problem, &column));
  EXPECT_EQ(problem, "text after the object");
  EXPECT_EQ(column, 10u);
  EXPECT_FALSE(r.parse("{\"a\": 1,}", &problem, &column));
  EXPECT_EQ(problem, "unexpected character '}'");
  EXPECT_EQ(column, 9u);
  // Free text may hold any bytes (a trace's notes are not read).
  EXPECT_TRUE(r.parse("{\"note\": \"\xff\xfe\"}", &problem, &column)) << problem;
}

TEST(JsonLine, TraceLinesReadWithBoostJson) {
  testing::TempDir dir("json_trace");
  const std::string good = dir.file("good.jsonl");
  testing::write_file(good,
                      "{\"arrival_s\": 0.5, \"prompt_tokens\": 4, \"output_tokens\": 2, \"meta\": {\"prompt_tokens\": 99}, "
                      "\"pr\\u0069ority\": 3, \"prefix_blocks\": [7, 8]}\n");
  const std::vector<TraceRow> rows = read_trace(good, "canonical");
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].prompt_tokens, 4);  // the nested "prompt_tokens" is not the row's
  EXPECT_EQ(rows[0].priority, 3);
  EXPECT_EQ(rows[0].prefix_blocks, (std::vector<std::uint64_t>{7, 8}));

  auto error_of = [&](const std::string& content) {
    const std::string path = dir.file("bad.jsonl");
    testing::write_file(path, content);
    try {
      read_trace(path, "canonical");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string ok = "{\"arrival_s\": 0, \"prompt_tokens\": 1, \"output_tokens\": 1}\n";
  EXPECT_HAS(error_of(ok + "\n{\"arrival_s\": 0, \"prompt_tokens\": 1, \"output_tokens\": 1, \"n\": \"a\tb\"}\n"),
             "bad.jsonl:3: a raw control character (0x09)");
  EXPECT_HAS(error_of(ok + "{\"arrival_s\": 0, \"prompt_tokens\": 1, \"output_tokens\": 1, \"n\": \"\\udc00\"}\n"),
             "bad.jsonl:2: a \\u escape of a lone UTF-16 surrogate at column 70");
  EXPECT_HAS(error_of("{\"arrival_s\": 0, \"prompt_tokens\": 01, \"output_tokens\": 1}\n"),
             "bad.jsonl:1: unexpected character '1' at column 36");
  EXPECT_HAS(error_of("{\"arrival_s\": 0, \"prompt_tokens\": 1, \"output_tokens\": 1, \"prefix_blocks\": [1, [2]]}\n"),
             "bad.jsonl:1: prefix_blocks element '[...]' is not a non-negative integer");
  EXPECT_HAS(error_of("{\"arrival_s\": 0, \"prompt_tokens\": 2.0, \"output_tokens\": 1}\n"),
             "bad.jsonl:1: prompt_tokens '2.0' is not an integer");
}

TEST(Json, TokenizerJsonErrorsNameFileLineAndColumn) {
  testing::TempDir dir("json_tokenizer");
  const std::string path = dir.file("tokenizer.json");
  testing::write_file(path, "{\n  \"model\": {\n    \"type\": \"BPE\",\n    \"vocab\": {\"a\": 0,}\n  }\n}\n");
  try {
    load_hf_tokenizer(path);
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), path + ": invalid JSON: unexpected character '}' at line 4:22");
  }
}

TEST(Json, ManifestReadBack) {
  const std::string manifest =
      "{\n  \"experiment\": \"x\", \"note\": \"\\\"resumes\\\": 9\",\n  \"run\": {\"status\": \"running\", \"resumes\": 3, "
      "\"shard\": {\"index\": 1, \"count\": 4}, \"config_toml_hash\": \"abc\", \"config_forced\": [{\"resume\": 2, "
      "\"from\": \"abc\", \"to\": \"def\", \"changed\": [\"repeats (1 \\u2192 2)\"]}]}\n}\n";
  EXPECT_EQ(manifest_resumes(manifest), 3);
  const Shard shard = manifest_shard(manifest);
  EXPECT_EQ(shard.index, 1);
  EXPECT_EQ(shard.count, 4);
  RunState state;
  manifest_config_record(manifest, state);
  EXPECT_EQ(state.config_hash, "abc");
  ASSERT_EQ(state.config_forced.size(), 1u);
  EXPECT_EQ(state.config_forced[0].resume, 2);
  EXPECT_EQ(state.config_forced[0].to, "def");
  EXPECT_EQ(state.config_forced[0].keys, std::vector<std::string>{"repeats (1 \u2192 2)"});
  // Not JSON (a manifest cut short): nothing recorded, nothing thrown.
  EXPECT_EQ(manifest_resumes("{\"run\": {\"resumes\": 3"), 0);
  EXPECT_EQ(manifest_shard("{\"run\": {\"shard\": ").count, 1);
}

TEST(Json, MergeRefusesAManifestWithoutStacks) {
  testing::TempDir dir("json_merge");
  const std::string shard = dir.file("shard0");
  std::filesystem::create_directories(shard);
  testing::write_file(shard + "/manifest.json", "{\"experiment\": \"x\", \"run\": {\"status\": \"complete\"}}\n");
  testing::write_file(shard + "/config.toml", "[experiment]\nname = \"x\"\n");
  try {
    merge_shards(MergeOptions{{shard}, dir.file("out"), false});
    ADD_FAILURE() << "merged";
  } catch (const Error& e) {
    EXPECT_HAS(std::string(e.what()), "manifest.json has no \"stacks\" list");
  }
  testing::write_file(shard + "/manifest.json", "{\"experiment\": \"x\",\n \"run\": }\n");
  try {
    merge_shards(MergeOptions{{shard}, dir.file("out"), false});
    ADD_FAILURE() << "merged";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), shard + "/manifest.json: invalid JSON: unexpected character '}' at line 2:9");
  }
}

}  // namespace
}  // namespace inferlab
