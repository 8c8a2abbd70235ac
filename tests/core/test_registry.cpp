// Registry: discovery, refusal of broken libraries, name/parameter errors, library lifetime.
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "inferlab/error.h"
#include "inferlab/plugin/registry.h"
#include "inferlab/sim/sim.h"
#include "test_support.h"

namespace inferlab {
namespace {

namespace fs = std::filesystem;

std::string test_plugins(const std::string& sub) { return testing::binary_dir() + "/test_plugins/" + sub; }

using testing::error_of;

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

// Plugins built before the device seam (ABI 1; the build is at 3 since SeqView::slo_class and
// ScheduleDecision::reject) are refused by version with a clear message.
TEST(Registry, RefusesAPluginBuiltAgainstThePreDeviceAbi) {
  EXPECT_GE(kPluginAbiVersion, 2);
  Registry reg({test_plugins("abi_v1"), testing::plugin_dir()});
  bool seen = false;
  for (const auto& rec : reg.load_log())
    if (rec.path.find("abi_v1") != std::string::npos) {
      seen = true;
      EXPECT_FALSE(rec.ok);
      EXPECT_NE(rec.message.find("ABI version 1 does not match this build's " + std::to_string(kPluginAbiVersion) +
                                 "; rebuild the plugin"),
                std::string::npos)
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

// A device of kind cuda that only has memory: what the registry sees when a plugin is asked to
// run on a GPU, on a machine without one.
class FakeCudaDevice final : public Device {
 public:
  DeviceKind kind() const override { return DeviceKind::kCuda; }
  std::string describe() const override { return "fake cuda"; }
  void* allocate(std::size_t bytes) override { return std::calloc(1, bytes); }
  void deallocate(void* ptr) override { std::free(ptr); }
  void copy_to_device(void* dst, const void* src, std::size_t bytes) override { std::memcpy(dst, src, bytes); }
  void copy_to_host(void* dst, const void* src, std::size_t bytes) override { std::memcpy(dst, src, bytes); }
  void copy_on_device(void* dst, const void* src, std::size_t bytes) override { std::memmove(dst, src, bytes); }
  void op_begin(TimeCategory) override {}
  void op_end(TimeCategory) override {}
  double timer_overhead_s() const override { return 0; }
};

// The registry creates a strategy with the implementation of the device it will run on, and
// answers supports() with that implementation's KV dtypes and checks.
TEST(RegistryDevices, PicksTheFactoryOfTheDevice) {
  Registry reg({test_plugins("per_device")});
  const Params params = reg.resolve(PluginKind::kAttention, "per_device", {}, "t");
  CpuDevice cpu(1);
  FakeCudaDevice cuda;
  SimDevice sim;
  EXPECT_EQ(reg.create_attention("per_device", params, cpu)->traffic(8).score_bytes, 1);
  EXPECT_EQ(reg.create_attention("per_device", params, cuda)->traffic(8).score_bytes, 2);
  EXPECT_EQ(reg.create_attention("per_device", params, sim)->traffic(8).score_bytes, 3);

  ModelConfig model;
  model.n_heads = 8;
  EXPECT_TRUE(reg.check_support(PluginKind::kAttention, "per_device", {model, DeviceKind::kCpu, KvDtype::kInt8, params})
                  .empty());
  const auto int8 = reg.check_support(PluginKind::kAttention, "per_device", {model, DeviceKind::kCuda, KvDtype::kInt8, params});
  ASSERT_EQ(int8.size(), 1u);
  EXPECT_NE(int8[0].find("cannot read KV cache stored as int8"), std::string::npos) << int8[0];
  EXPECT_NE(int8[0].find("on device 'cuda'"), std::string::npos) << int8[0];
  model.n_heads = 128;  // the cuda implementation's own check; the cpu one has none
  EXPECT_TRUE(reg.check_support(PluginKind::kAttention, "per_device", {model, DeviceKind::kCpu, KvDtype::kF32, params})
                  .empty());
  const auto heads = reg.check_support(PluginKind::kAttention, "per_device", {model, DeviceKind::kCuda, KvDtype::kF32, params});
  ASSERT_EQ(heads.size(), 1u);
  EXPECT_EQ(heads[0], "cuda: at most 64 heads");
}

// A plugin without a cuda implementation asked for cuda is refused, naming the plugin and the
// devices it has; on the simulated device (no ops) its CPU implementation is used.
TEST(RegistryDevices, RefusesADeviceThePluginHasNoImplementationFor) {
  Registry reg({testing::plugin_dir()});
  const PluginDescriptor& skip = reg.find(PluginKind::kDecoding, "layer_skip");  // runs the model's layers on the CPU
  ASSERT_EQ(skip.devices.count(DeviceKind::kCuda), 0u);
  const Params params = reg.resolve(PluginKind::kDecoding, "layer_skip", {}, "t");
  FakeCudaDevice cuda;
  const std::string msg = error_of([&] { reg.create_decoder("layer_skip", params, cuda); });
  EXPECT_NE(msg.find("decoding/layer_skip does not run on device 'cuda' (it runs on: " + skip.device_names() + ")"),
            std::string::npos)
      << msg;
  EXPECT_EQ(skip.device_names(), "cpu");
  ModelConfig model;
  model.n_layers = 4;
  const auto reasons = reg.check_support(PluginKind::kDecoding, "layer_skip", {model, DeviceKind::kCuda, {}, params});
  ASSERT_FALSE(reasons.empty());
  EXPECT_EQ(reasons[0], "does not run on device 'cuda' (it runs on: cpu)");
  SimDevice sim;
  ModelWeights weights;
  weights.config = model;
  EXPECT_NE(reg.create_decoder("layer_skip", params, sim, &weights), nullptr);
}

// A device-independent strategy declares every kind once, with any_device.
TEST(RegistryDevices, DeviceIndependentStrategiesRunAnywhere) {
  Registry reg({testing::plugin_dir()});
  for (const char* name : {"static", "continuous"})
    EXPECT_EQ(reg.find(PluginKind::kScheduling, name).device_names(), "cpu, cuda, sim") << name;
  const PluginDescriptor& d = reg.find(PluginKind::kScheduling, "static");
  FakeCudaDevice cuda;
  EXPECT_NE(reg.create_scheduler("static", reg.resolve(PluginKind::kScheduling, "static", {}, "t"), cuda), nullptr);
  EXPECT_EQ(d.implementation(DeviceKind::kSim), &d.devices.at(DeviceKind::kSim));
}

TEST(Registry, EditDistance) {
  EXPECT_EQ(edit_distance("flash", "flash"), 0u);
  EXPECT_EQ(edit_distance("flsh", "flash"), 1u);
  EXPECT_EQ(edit_distance("", "abc"), 3u);
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
}

}  // namespace
}  // namespace inferlab
