// Provenance of a run: the manifest names each plugin's library file and its SHA-256, so a row
// can be traced to the exact (possibly out-of-tree) code that produced it.
#include <cstdio>

#include <gtest/gtest.h>

#include "format_writers.h"
#include "inferlab/experiment/experiment.h"
#include "inferlab/results/manifest.h"
#include "inferlab/plugin/registry.h"
#include "inferlab/run/runner.h"
#include "inferlab/support/sha256.h"
#include "test_support.h"

namespace inferlab {
namespace {

TEST(Sha256, MatchesFips180Vectors) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  // 56 bytes: the padding needs a second block.
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Manifest, RecordsEachPluginsLibraryAndSha256) {
  testing::TempDir dir("manifest_libs");
  const std::string toml = dir.file("exp.toml");
  testing::write_file(toml, "[model]\npreset = \"stories260k\"\n");
  Registry registry({testing::plugin_dir()});
  const ExperimentSpec spec = load_experiment(toml, {});
  const ModelConfig model = experiment_model_config(spec.model);
  const Plan plan = plan_experiment(spec, registry, model);
  const std::string m = manifest_json(plan, registry, model, 1, 1, nullptr);
  ASSERT_FALSE(registry.list().empty());
  for (const PluginDescriptor* d : registry.list()) {
    const std::string lib = registry.library_path(*d);
    EXPECT_TRUE(std::filesystem::exists(lib)) << lib;
    const std::string sha = file_sha256(lib);
    ASSERT_EQ(sha.size(), 64u);
    EXPECT_NE(m.find("\"name\": \"" + d->name + "\", \"version\": \"" + d->version + "\", \"library\": \"" + lib +
                     "\", \"sha256\": \"" + sha + "\""),
              std::string::npos)
        << d->name << " in " << m;
  }
  // The digest is the one sha256sum prints (where the tool exists).
  const std::string lib = registry.library_path(*registry.list().front());
  if (FILE* p = popen(("sha256sum '" + lib + "' 2>/dev/null").c_str(), "r")) {
    char buf[65] = {};
    const bool got = fread(buf, 1, 64, p) == 64;
    pclose(p);
    if (got) {
      EXPECT_EQ(std::string(buf), file_sha256(lib));
    }
  }
}

}  // namespace
}  // namespace inferlab
