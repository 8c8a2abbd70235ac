// `inferlab conformance LIB.so...`: the conformance suites of a plugin's kind run on any plugin
// library, in the tree or out of it. The attention example of docs/writing-a-plugin.md (one pass,
// online softmax; tests/install/onepass_attention, built here as a test plugin) passes; its copy
// that drops the last K/V block of every context fails, and the output names the failing cases.
#include <cstdlib>
#include <filesystem>

#include <gtest/gtest.h>

#include "test_support.h"

namespace inferlab {
namespace {

std::string test_plugin(const std::string& name) {
  return testing::binary_dir() + "/test_plugins/" + name + "/libinferlab_testplugin_" + name + ".so";
}

TEST(ConformanceCli, TheOnePassExamplePassesEveryAttentionCase) {
  const auto r = testing::run_inferlab("conformance " + test_plugin("onepass"));
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  for (const char* c : {"[       OK ] Plugins/AttentionConformance.MixedStepMatchesReferenceForEveryHeadLayoutAndBlockSize/onepass_cpu_default",
                        "[       OK ] Plugins/AttentionConformance.ContextsAroundBlockEdgesMatchReference/onepass_cpu_default",
                        "[       OK ] Plugins/AttentionKvFormats.EveryKvFormatMatchesTheReference/onepass_cpu_default",
                        "[       OK ] Plugins/AttentionInTheModel.GreedyTokensEqualTheReferenceAttention/onepass_cpu_default",
                        "[  PASSED  ]"})
    EXPECT_NE(r.out.find(c), std::string::npos) << c << "\n" << r.out;
  EXPECT_EQ(r.out.find("FAILED"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("/naive_"), std::string::npos) << "only the named plugin is under test\n" << r.out;
}

TEST(ConformanceCli, DroppingTheLastKvBlockFailsNamingTheCase) {
  const auto r = testing::run_inferlab("conformance " + test_plugin("onepass_drops_last_block"));
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("[  FAILED  ] Plugins/AttentionConformance.ContextsAroundBlockEdgesMatchReference/onepass_cpu_default"),
            std::string::npos) << r.out;
}

// Without named libraries test_conformance covers $INFERLAB_PLUGIN_PATH's folders too (ctest
// points it at the build's plugins).
TEST(ConformanceCli, TestConformanceCoversThePluginPath) {
  const std::string cmd = "INFERLAB_PLUGIN_PATH=" + testing::binary_dir() + "/test_plugins/onepass " + testing::binary_dir() +
                          "/bin/test_conformance --gtest_filter='*onepass*' > " + testing::binary_dir() + "/onepass_path.out 2>&1";
  EXPECT_EQ(std::system(cmd.c_str()), 0);
  const std::string out = testing::slurp(testing::binary_dir() + "/onepass_path.out");
  EXPECT_NE(out.find("[  PASSED  ] 8 tests."), std::string::npos) << out;
}

TEST(ConformanceCli, AnInTreePluginRunsOnlyItsOwnCases) {
  const auto r = testing::run_inferlab("conformance " + testing::plugin_dir() +
                                       "/libinferlab_attention_flash.so --filter '*ZeroRowBatch*'");
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("[       OK ] Plugins/AttentionConformance.ZeroRowBatchLeavesTheOutputUntouched/flash_cpu_default"),
            std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("/naive_"), std::string::npos) << r.out;
}

TEST(ConformanceCli, WhatIsNotAPluginIsAOneLineError) {
  auto r = testing::run_inferlab("conformance /nonexistent/libx.so");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("/nonexistent/libx.so: no such file; allowed: a plugin library"), std::string::npos) << r.err;
  r = testing::run_inferlab("conformance " + testing::binary_dir() + "/test_plugins/bad_abi/libinferlab_testplugin_bad_abi.so");
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("not loaded as a plugin: ABI version"), std::string::npos) << r.err;
  r = testing::run_inferlab("conformance");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("conformance needs at least one plugin library"), std::string::npos) << r.err;
}

// docs/writing-a-plugin.md shows the example's two files verbatim.
TEST(ConformanceCli, TheDocShowsTheExampleItTests) {
  const std::string doc = testing::slurp(testing::source_dir() + "/docs/writing-a-plugin.md");
  for (const char* file : {"onepass.cpp", "CMakeLists.txt"}) {
    const std::string text = testing::slurp(testing::source_dir() + "/tests/install/onepass_attention/" + file);
    ASSERT_FALSE(text.empty()) << file;
    EXPECT_NE(doc.find(text), std::string::npos) << "docs/writing-a-plugin.md does not show " << file << " as it is";
  }
}

}  // namespace
}  // namespace inferlab
