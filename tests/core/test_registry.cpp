// Registry: discovery, refusal of broken libraries, name/parameter errors, library lifetime.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "inferlab/error.h"
#include "inferlab/registry.h"
#include "test_support.h"

namespace inferlab {
namespace {

namespace fs = std::filesystem;

std::string test_plugins(const std::string& sub) { return testing::binary_dir() + "/test_plugins/" + sub; }

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Registry, FindsEveryBuiltInStrategy) {
  Registry reg({testing::plugin_dir()});
  for (auto [kind, name] : std::vector<std::pair<PluginKind, std::string>>{
           {PluginKind::kAttention, "naive"},      {PluginKind::kAttention, "flash"},
           {PluginKind::kAttention, "split_k"},
           {PluginKind::kQuantization, "none"},    {PluginKind::kQuantization, "int8"},
           {PluginKind::kQuantization, "int4"},
           {PluginKind::kScheduling, "static"},    {PluginKind::kScheduling, "continuous"},
           {PluginKind::kDecoding, "sampling"},    {PluginKind::kDecoding, "prompt_lookup"}}) {
    const auto& d = reg.find(kind, name);
    EXPECT_EQ(d.name, name);
    EXPECT_FALSE(d.version.empty());
    EXPECT_FALSE(d.summary.empty());
  }
  for (const auto& rec : reg.load_log()) EXPECT_TRUE(rec.ok) << rec.path << ": " << rec.message;
}

TEST(Registry, UnknownNameListsAvailableAndClosest) {
  Registry reg({testing::plugin_dir()});
  std::string msg = error_of([&] { reg.find(PluginKind::kAttention, "flsh", "exp.toml:3:1"); });
  EXPECT_NE(msg.find("exp.toml:3:1"), std::string::npos) << msg;
  EXPECT_NE(msg.find("available: flash, naive"), std::string::npos) << msg;
  EXPECT_NE(msg.find("did you mean 'flash'"), std::string::npos) << msg;
}

TEST(Registry, RefusesMismatchedAbiWithoutTouchingDescriptor) {
  Registry reg({test_plugins("bad_abi"), testing::plugin_dir()});
  bool seen = false;
  for (const auto& rec : reg.load_log())
    if (rec.path.find("bad_abi") != std::string::npos) {
      seen = true;
      EXPECT_FALSE(rec.ok);
      EXPECT_NE(rec.message.find("ABI version"), std::string::npos) << rec.message;
    }
  EXPECT_TRUE(seen);
  EXPECT_NO_THROW(reg.find(PluginKind::kAttention, "naive"));  // the good ones still load
}

// Plugins built before the device seam (ABI 1) are refused by version with a clear message.
TEST(Registry, RefusesAPluginBuiltAgainstThePreDeviceAbi) {
  EXPECT_EQ(kPluginAbiVersion, 3);
  Registry reg({test_plugins("abi_v1"), testing::plugin_dir()});
  bool seen = false;
  for (const auto& rec : reg.load_log())
    if (rec.path.find("abi_v1") != std::string::npos) {
      seen = true;
      EXPECT_FALSE(rec.ok);
      EXPECT_NE(rec.message.find("ABI version 1 does not match this build's 3; rebuild the plugin"), std::string::npos)
          << rec.message;
    }
  EXPECT_TRUE(seen);
}

TEST(Registry, DuplicateNameIsAnErrorWhenUsed) {
  Registry reg({testing::plugin_dir(), test_plugins("duplicate")});
  std::string msg = error_of([&] { reg.find(PluginKind::kAttention, "naive"); });
  EXPECT_NE(msg.find("more than one library"), std::string::npos) << msg;
  EXPECT_NO_THROW(reg.find(PluginKind::kAttention, "flash"));
}

TEST(Registry, LibraryThatFailsToLoadIsRecorded) {
  fs::path dir = fs::temp_directory_path() / "inferlab_registry_garbage";
  fs::create_directories(dir);
  std::ofstream(dir / "libgarbage.so") << "this is not an ELF file";
  Registry reg({dir.string()});
  ASSERT_EQ(reg.load_log().size(), 1u);
  EXPECT_FALSE(reg.load_log()[0].ok);
  EXPECT_NE(reg.load_log()[0].message.find("failed to load"), std::string::npos) << reg.load_log()[0].message;
  std::string msg = error_of([&] { reg.find(PluginKind::kDecoding, "garbage"); });
  EXPECT_NE(msg.find("skipped"), std::string::npos) << msg;  // the reason is surfaced
  fs::remove_all(dir);
}

TEST(Registry, ParameterErrorsNameTheAllowedOnes) {
  Registry reg({testing::plugin_dir()});
  std::string msg = error_of([&] {
    reg.resolve(PluginKind::kScheduling, "continuous", {{"max_batchh", std::int64_t{4}}}, "x.toml:9:1");
  });
  EXPECT_NE(msg.find("x.toml:9:1"), std::string::npos) << msg;
  EXPECT_NE(msg.find("unknown parameter 'max_batchh'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("max_batch (int)"), std::string::npos) << msg;
  msg = error_of([&] { reg.resolve(PluginKind::kScheduling, "continuous", {{"max_batch", std::string("big")}}, "w"); });
  EXPECT_NE(msg.find("expects int"), std::string::npos) << msg;
  msg = error_of([&] { reg.resolve(PluginKind::kScheduling, "continuous", {{"max_batch", std::int64_t{0}}}, "w"); });
  EXPECT_NE(msg.find("out of range"), std::string::npos) << msg;
  Params p = reg.resolve(PluginKind::kDecoding, "sampling", {{"temperature", std::int64_t{1}}}, "w");
  EXPECT_DOUBLE_EQ(p.get_float("temperature"), 1.0);  // ints accepted for floats
}

TEST(Registry, CreatedObjectsOutliveTheRegistry) {
  std::shared_ptr<Decoder> dec;
  {
    Registry reg({testing::plugin_dir()});
    CpuDevice device(1);
    dec = reg.create_decoder("sampling", reg.resolve(PluginKind::kDecoding, "sampling", {}, "t"), device);
  }
  float logits[4] = {0.1f, 2.0f, -1.0f, 0.5f};
  std::vector<int> out;
  Rng rng(1);
  dec->accept({}, {}, logits, 4, rng, out);  // code of an unloaded library would crash here
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0], 1);
}

TEST(Registry, EditDistance) {
  EXPECT_EQ(edit_distance("flash", "flash"), 0u);
  EXPECT_EQ(edit_distance("flsh", "flash"), 1u);
  EXPECT_EQ(edit_distance("", "abc"), 3u);
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
}

}  // namespace
}  // namespace inferlab
