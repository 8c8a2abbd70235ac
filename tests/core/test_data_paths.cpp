// Every path an experiment names resolves the same way (docs/experiment-format.md, "Paths"):
// the TOML's folder, the working directory, the source tree, the data root — model.path as much
// as a plugin's path parameter (speculative's draft_model) — and a missing file's error lists
// each place tried.
#include <filesystem>

#include <gtest/gtest.h>

#include "format_writers.h"
#include "inferlab/error.h"
#include "inferlab/experiment/experiment.h"
#include "inferlab/plugin/registry.h"
#include "inferlab/run/runner.h"
#include "test_support.h"

namespace inferlab {
namespace {

namespace fs = std::filesystem;

const char* kDraftToml =
    "[model]\npath = \"models/stories260K/stories260K.gguf\"\n"
    "[baseline]\ndecoding = { name = \"speculative\", draft_model = \"%s\" }\n";

std::string toml_with_draft(const std::string& draft) {
  std::string t = kDraftToml;
  t.replace(t.find("%s"), 2, draft);
  return t;
}

std::string planned_draft(const std::string& toml_path) {
  Registry registry({testing::plugin_dir()});
  const ExperimentSpec spec = load_experiment(toml_path, {});
  const Plan plan = plan_experiment(spec, registry, experiment_model_config(spec.model));
  return plan.variants.at(0).decoding.get_string("draft_model");
}

TEST(DataPaths, DraftModelResolvesLikeModelPathFromAnotherWorkingDirectory) {
  const std::string gguf = testing::data_path("models/stories260K/stories260K.gguf");
  INFERLAB_REQUIRE_FILE(gguf);
  testing::TempDir exp_dir("paths_exp"), elsewhere("paths_cwd");
  const std::string toml = exp_dir.file("exp.toml");
  testing::write_file(toml, toml_with_draft("models/stories260K/stories260K.gguf"));
  // The data root holds it: found whatever the working directory.
  const testing::CliResult r = testing::run_inferlab("validate " + toml, elsewhere.path.string());
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(fs::canonical(planned_draft(toml)), fs::canonical(gguf));

  // The TOML's folder comes first.
  fs::create_directories(exp_dir.path / "drafts");
  fs::copy_file(gguf, exp_dir.path / "drafts" / "d.gguf");
  testing::write_file(toml, toml_with_draft("drafts/d.gguf"));
  const testing::CliResult local = testing::run_inferlab("validate " + toml, elsewhere.path.string());
  EXPECT_EQ(local.code, 0) << local.err;
  EXPECT_EQ(fs::canonical(planned_draft(toml)), fs::canonical(exp_dir.path / "drafts" / "d.gguf"));

  // A preset name is not a path.
  testing::write_file(toml, toml_with_draft("stories260k"));
  EXPECT_EQ(planned_draft(toml), "stories260k");
}

TEST(DataPaths, MissingDraftListsEveryPlaceTried) {
  INFERLAB_REQUIRE_FILE(testing::data_path("models/stories260K/stories260K.gguf"));
  testing::TempDir exp_dir("paths_missing");
  const std::string toml = exp_dir.file("exp.toml");
  testing::write_file(toml, toml_with_draft("drafts/none.gguf"));
  try {
    planned_draft(toml);
    ADD_FAILURE() << "a missing draft_model was accepted";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(toml + ":4:"), std::string::npos) << m;  // the [baseline] decoding line
    EXPECT_NE(m.find("draft_model"), std::string::npos) << m;
    for (const fs::path& dir : {exp_dir.path, fs::current_path(), fs::path(testing::source_dir()),
                                fs::path(data_root())})
      EXPECT_NE(m.find((dir / "drafts/none.gguf").lexically_normal().string()), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace inferlab
