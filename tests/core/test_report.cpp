// Report writing: JSON strings stay valid JSON, Markdown cells stay in their column, CI math.
#include <gtest/gtest.h>

#include "inferlab/results/report.h"

namespace inferlab {
namespace {

TEST(Report, JsonQuoteEscapesControlsAndReplacesInvalidUtf8) {
  EXPECT_EQ(json_quote("a\"b\\c\nd\x01"), "\"a\\\"b\\\\c\\nd\\u0001\"");
  EXPECT_EQ(json_quote("caf\xC3\xA9 \xE4\xB8\xAD"), "\"caf\xC3\xA9 \xE4\xB8\xAD\"");  // valid UTF-8 kept
  EXPECT_EQ(json_quote("x\xFFy\xC3"), "\"x\\ufffdy\\ufffd\"");                      // invalid bytes replaced
}

TEST(Report, SummaryKeepsPipesAndErrorsInsideTheirCells) {
  ResultRow ok{"a|b", 0, true, "", {{"ttft_ms_p50", 10.0}}, 1.0};
  ResultRow base{"base", 0, true, "", {{"ttft_ms_p50", 20.0}}, 1.0};
  ResultRow bad{"broken", 0, false, "line1\nline2 | `x`", {}, 1.0};
  std::string md = summary_markdown("t", "", {"base", "a|b", "broken"}, {base, ok, bad}, {});
  EXPECT_NE(md.find("| a\\|b |"), std::string::npos) << md;
  EXPECT_NE(md.find("10.00 (×0.500)"), std::string::npos) << md;
  EXPECT_NE(md.find("- broken: repeat 0: line1 line2 \\| 'x'"), std::string::npos) << md;
  EXPECT_NE(md.find("| broken (failed) |"), std::string::npos) << md;
}

TEST(Report, SummaryShowsMeanAndCiOverRepeats) {
  std::vector<ResultRow> rows;
  for (int r = 0; r < 3; ++r) rows.push_back({"base", r, true, "", {{"throughput_out_tok_s", 100.0 + 10 * r}}, 1.0});
  std::string md = summary_markdown("t", "", {"base"}, rows, {});
  // mean 110, sd 10, t(2) = 4.303, half-width 4.303 * 10 / sqrt(3) = 24.84
  EXPECT_NE(md.find("110.0 ± 24.84"), std::string::npos) << md;
}

}  // namespace
}  // namespace inferlab
