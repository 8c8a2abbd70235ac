// Settings that run but do not do what a user would expect say so: int4 KV whose group size
// makes it no smaller than int8, and an "fp32" reference that is a dequantised 4-bit file. And
// `--set variant=[...]` replaces the variant list.
#include <gtest/gtest.h>

#include "format_writers.h"
#include "inferlab/experiment/experiment.h"
#include "inferlab/formats/formats.h"
#include "inferlab/kv/kv_format.h"
#include "inferlab/results/manifest.h"
#include "inferlab/model/model_config.h"
#include "inferlab/plugin/registry.h"
#include "inferlab/run/runner.h"
#include "test_support.h"

namespace inferlab {
namespace {

TEST(ConfigWarnings, Int4KvNoSmallerThanInt8NamesTheKeyAndBytes) {
  const ModelConfig tiny = preset_config("stories260k");  // head_dim 8
  KvFormat f(KvDtype::kInt4);
  f.group_size = 8;
  const std::string w = kv_format_waste(f, tiny);
  EXPECT_NE(w.find("kv.group_size = 8"), std::string::npos) << w;
  EXPECT_NE(w.find("480 bytes/token, no smaller than int8's 480"), std::string::npos) << w;
  EXPECT_NE(w.find("use kv.dtype int8"), std::string::npos) << w;
  f.keys = KvDtype::kF32;  // int4-values: still no saving on that side
  EXPECT_FALSE(kv_format_waste(f, tiny).empty());
  KvFormat int8(KvDtype::kInt8);
  int8.group_size = 8;
  EXPECT_EQ(kv_format_waste(int8, tiny), "");
  const ModelConfig big = preset_config("tinyllama-1.1b");  // head_dim 64
  KvFormat g32(KvDtype::kInt4);
  EXPECT_EQ(kv_format_waste(g32, big), "");  // 32-value groups: int4 is smaller
  g32.group_size = 8;
  EXPECT_NE(kv_format_waste(g32, big).find("group_size of 16 or more"), std::string::npos);

  // validate says so, naming the TOML line, and still succeeds.
  testing::TempDir dir("kv_waste");
  const std::string toml = dir.file("exp.toml");
  testing::write_file(toml, "[model]\npreset = \"stories260k\"\n[[variant]]\nname = \"q\"\n"
                            "kv = { dtype = \"int4\", group_size = 8 }\n");
  const testing::CliResult r = testing::run_inferlab("validate " + toml);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find(toml + ":5:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("no smaller than int8's 480"), std::string::npos) << r.err;
}

TEST(ConfigWarnings, DequantisedReferenceIsSaidInTheManifest) {
  EXPECT_EQ(quantized_source_note({}), "");
  EXPECT_EQ(quantized_source_note({{"layers.0.wq", static_cast<std::uint32_t>(GgmlType::kF16)}}), "");
  const std::string note = quantized_source_note({{"layers.0.wq", static_cast<std::uint32_t>(GgmlType::kQ4_1)},
                                                  {"classifier", static_cast<std::uint32_t>(GgmlType::kQ8_0)}});
  EXPECT_NE(note.find("linears stored as Q4_1, Q8_0"), std::string::npos) << note;
  EXPECT_NE(note.find("dequantised file, not a float checkpoint"), std::string::npos) << note;

  testing::TempDir dir("ref_note");
  const std::string toml = dir.file("exp.toml");
  testing::write_file(toml, "[model]\npreset = \"stories260k\"\n");
  Registry registry({testing::plugin_dir()});
  const ExperimentSpec spec = load_experiment(toml, {});
  ModelConfig model = experiment_model_config(spec.model);
  const Plan plan = plan_experiment(spec, registry, model);
  EXPECT_NE(manifest_json(plan, registry, model, 1, 1, nullptr).find("\"reference_note\": \"\""), std::string::npos);
  model.source_linear_types = {{"layers.0.wq", static_cast<std::uint32_t>(GgmlType::kQ4_1)}};
  EXPECT_NE(manifest_json(plan, registry, model, 1, 1, nullptr).find("\"reference_note\": \"linears stored as Q4_1"),
            std::string::npos);
}

TEST(ConfigWarnings, SetReplacesTheVariantList) {
  testing::TempDir dir("set_variants");
  const std::string toml = dir.file("exp.toml");
  testing::write_file(toml, "[model]\npreset = \"stories260k\"\n[[variant]]\nname = \"a\"\nattention = \"flash\"\n"
                            "[[variant]]\nname = \"b\"\nattention = \"naive\"\n");
  const ExperimentSpec spec =
      load_experiment(toml, {"variant=[{name = \"c\", kv = {prefix_caching = true}}, {name = \"d\"}]"});
  ASSERT_EQ(spec.variants.size(), 3u);  // the baseline, then c and d
  EXPECT_EQ(spec.variants[1].name, "c");
  EXPECT_TRUE(spec.variants[1].stack.kv.prefix_caching);
  EXPECT_EQ(spec.variants[2].name, "d");
  EXPECT_EQ(load_experiment(toml, {"variant=[]"}).variants.size(), 1u);  // the baseline alone
  // Then indexable like the file's own.
  const ExperimentSpec indexed = load_experiment(toml, {"variant=[{name = \"c\"}]", "variant.0.attention=naive"});
  EXPECT_EQ(indexed.variants.at(1).stack.attention.name, "naive");
}

}  // namespace
}  // namespace inferlab
