// Token choice on the GPU through the real Engine: stories260K on the CUDA device with the
// registry's 'sampling' decoder (greedy, and temperature 0.8 without top-k / top-p) chooses every
// step's tokens on the device — eagerly and inside captured decode-step graphs — and gives
// exactly the tokens of the host path (the same decoder behind HostChoiceDecoder: logits
// downloaded, accept_for on the host) for the same seed. Skipped, with the reason, without a
// GPU, the model file, or a CUDA 'flash' attention.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "inferlab/device/cuda_device.h"
#include "inferlab/formats/checkpoint.h"
#include "inferlab/model/model.h"
#include "inferlab/plugin/registry.h"
#include "model_fixtures.h"
#include "test_support.h"
#include "token_choice_checks.h"

namespace inferlab {
namespace {

TEST(CudaTokenChoice, DeviceChoiceGivesTheHostPathsTokens) {
  INFERLAB_REQUIRE_CUDA();
  const std::string path = testing::data_path("models/stories260K/stories260K.bin");
  INFERLAB_REQUIRE_FILE(path);
  const LoadedModel loaded = load_model(path);
  Registry registry(Registry::default_search_path());
  if (registry.find(PluginKind::kAttention, "flash").devices.count(DeviceKind::kCuda) == 0)
    GTEST_SKIP() << "attention 'flash' has no CUDA path in this build";
  const std::vector<Request> requests = testing::token_choice_requests(loaded.weights.config.vocab_size, 5, 40);
  for (bool graphs : {false, true}) {
    auto dev = make_device(DeviceKind::kCuda, 0);
    compute_device(*dev, "test").set_cuda_graphs(graphs);
    auto attention =
        registry.create_attention("flash", registry.resolve(PluginKind::kAttention, "flash", {}, "test"), *dev);
    auto quant = testing::none_quantization(*dev);
    Model model(loaded.weights, *quant, *dev);
    auto scheduler = [&] {
      return registry.create_scheduler("continuous", registry.resolve(PluginKind::kScheduling, "continuous", {}, "test"),
                                       *dev);
    };
    for (double t : {0.0, 0.8}) {
      SCOPED_TRACE(std::string(graphs ? "graphs" : "eager") + ", temperature " + std::to_string(t));
      auto decoder = registry.create_decoder(
          "sampling", registry.resolve(PluginKind::kDecoding, "sampling", {{"temperature", t}}, "test"), *dev);
      ASSERT_NE(decoder->device_choice().kind, TokenChoice::Kind::kNone);
      const long long replays0 = model.forward_stats().graph_replays;
      const testing::ChoicePaths p = testing::run_both_choice_paths(model, *attention, *decoder, scheduler, requests, 3);
      const RunTimeline& tl = p.device.timeline;
      EXPECT_EQ(tl.device_choice_steps, static_cast<long long>(tl.steps.size()));
      EXPECT_EQ(p.host.timeline.device_choice_steps, 0);
      EXPECT_EQ(p.device.outputs, p.host.outputs);
      if (graphs) {  // the choosing decode steps replayed their graphs
        EXPECT_GT(tl.graph_replays, 0);
        EXPECT_GT(p.host.timeline.graph_replays, 0);
      } else {
        EXPECT_EQ(model.forward_stats().graph_replays, replays0);
      }
    }
  }
}

}  // namespace
}  // namespace inferlab
