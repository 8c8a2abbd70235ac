// `inferlab compare --metric tokens_hash`: both runs record the column, so it compares (equal
// hash sets: unchanged; different: changed), rather than saying neither run records it.
#include <gtest/gtest.h>

#include "format_writers.h"
#include "inferlab/results/compare.h"
#include "inferlab/error.h"

namespace inferlab {
namespace {

const char* kHeader = "variant,repeat,status,error,wall_s,ttft_ms_p50,tokens_hash\n";

std::string write_run(const testing::TempDir& dir, const std::string& name, const std::string& rows) {
  const auto folder = dir.path / name;
  std::filesystem::create_directories(folder);
  testing::write_file((folder / "metrics.csv").string(), kHeader + rows);
  return folder.string();
}

TEST(Compare, TokensHashComparesTheHashes) {
  testing::TempDir dir("compare_hash");
  const std::string a = write_run(dir, "a", "base,0,ok,,1,10,00ab00ab00ab00ab\nbase,1,ok,,1,11,00ab00ab00ab00ab\n"
                                            "int4,0,ok,,1,9,1111222233334444\n");
  const std::string b = write_run(dir, "b", "base,0,ok,,1,12,00ab00ab00ab00ab\nint4,0,ok,,1,9,5555666677778888\n");
  const auto rows = compare_runs(read_metric_table(a), read_metric_table(b), {"tokens_hash"});
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].variant, "base");
  EXPECT_EQ(rows[0].hashes_a, "00ab00ab00ab00ab");  // kept as text: leading zeros intact
  EXPECT_EQ(rows[0].n_a, 2u);
  EXPECT_FALSE(rows[0].flagged);
  EXPECT_TRUE(rows[1].flagged);
  const std::string md = comparison_markdown(a, b, rows);
  EXPECT_NE(md.find("| int4 | tokens_hash | `1111222233334444` (1) | `5555666677778888` (1) |"), std::string::npos) << md;
  EXPECT_NE(md.find("1 change(s) flagged of 2"), std::string::npos) << md;
}

TEST(Compare, TokensHashMissingFromBothRunsIsRefused) {
  testing::TempDir dir("compare_nohash");
  const auto folder = dir.path / "a";
  std::filesystem::create_directories(folder);
  testing::write_file((folder / "metrics.csv").string(), "variant,repeat,status,error,wall_s,ttft_ms_p50\nb,0,ok,,1,2\n");
  const MetricTable t = read_metric_table(folder.string());
  EXPECT_THROW(compare_runs(t, t, {"tokens_hash"}), Error);
}

}  // namespace
}  // namespace inferlab
