// A greedy decoding strategy that stops in accept() (sleeping in 5 ms naps) while the file
// `while_exists` exists, or for ever when it is "": for the cell time limit, and for
// interrupting a run at a known cell and resuming it after the file is removed.
#include <chrono>
#include <filesystem>
#include <thread>

#include "test_plugin.h"

namespace {
class HangDecoder final : public inferlab::test_plugins::HookedGreedyDecoder {
 public:
  explicit HangDecoder(std::string path) : path_(std::move(path)) {}

 private:
  void before_token() override {
    while (path_.empty() || std::filesystem::exists(path_)) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  std::string path_;
};
inferlab::PluginDescriptor describe() {
  inferlab::PluginDescriptor d = inferlab::test_plugins::descriptor(
      inferlab::PluginKind::kDecoding, "hang",
      "greedy, but waits while a file exists (\"\" = for ever; time-limit and interrupt tests)");
  d.params = {{"while_exists", inferlab::ParamType::kString, std::string(), std::nullopt, std::nullopt, {},
               "wait while this file exists; \"\" waits for ever"}};
  d.devices[inferlab::DeviceKind::kCpu] = [](const inferlab::PluginContext& ctx) {
    return std::make_unique<HangDecoder>(ctx.params.get_string("while_exists"));
  };
  return d;
}
}  // namespace
INFERLAB_PLUGIN(describe)
