// Decoding conformance: every registered decoder, on every device kind it declares, with its
// default parameters and each parameter at the ends of its range, through the real Engine over
// the StubExecutor (continuous batching, a generous pool). Every run finishes each request
// with max_output tokens, counts every token once and verifies no more drafts than it
// proposed; the same seed gives the same tokens; a decoder whose tokens do not depend on the
// seed must be lossless, i.e. give exactly the greedy tokens (the stub's logits have one
// dominant token). A decoder declaring a float parameter "temperature" is also run hot, where
// its tokens must depend on the seed.
#include <algorithm>
#include <iostream>

#include <gtest/gtest.h>

#include "engine_runs.h"
#include "inferlab/error.h"
#include "inferlab/model/weights.h"
#include "model_fixtures.h"
#include "plugin_cases.h"
#include "plugins/common/scheduling/continuous_scheduler.h"

namespace inferlab::testing {
namespace {

// Logits of the stub are 10 for its token, -10 elsewhere (vocab 64): at this temperature the
// dominant token keeps about 4% of the mass, so two seeds agreeing on ~90 tokens is impossible.
constexpr double kHotTemperature = 20.0;

// Weights and an attention for decoders that build a second model (speculative drafts): a random
// model of the stub's vocabulary with 4 layers. Its drafts are unrelated to the stub's tokens, so
// most are rejected — verification must still emit exactly the target's (the stub's) tokens.
const ModelWeights& draft_source() {
  static const ModelWeights w = [] {
    ModelConfig c = stub_model_config(64);
    c.n_layers = 4;
    c.max_seq_len = 4096;
    return random_weights(c, 7);
  }();
  return w;
}

class DecodingFixture : public ::testing::TestWithParam<PluginCase> {
 protected:
  void SetUp() override {
    std::string why;
    device_ = open_device(GetParam().device, why);
    if (!device_) GTEST_SKIP() << why;
    INFERLAB_SKIP_IF_REFUSED(GetParam(), draft_source().config);
    draft_attention_ = reference_attention_on(*device_);
  }

  // The tokens of a run with `seed`, after checking the run conforms.
  std::vector<std::vector<int>> run(const std::map<std::string, ParamValue>& given, std::uint64_t seed,
                                    StubRun* out = nullptr) {
    const Registry& reg = conformance_registry();
    std::shared_ptr<Decoder> decoder = reg.create_decoder(
        GetParam().plugin, reg.resolve(PluginKind::kDecoding, GetParam().plugin, given, "conformance"), *device_,
        &draft_source(), draft_attention_.get());
    ContinuousScheduler scheduler(512, 64, true);
    const Workload w = decoding_workload();
    StubRun r;
    try {
      r = run_on_stub(scheduler, *decoder, w, seed);
    } catch (const Error& e) {
      ADD_FAILURE() << "the engine refused the decoder's output: " << e.what();
      return {};
    }
    expect_run_conforms(r, w);
    if (out) *out = r;
    return r.result.outputs;
  }

  std::unique_ptr<Device> device_;
  std::shared_ptr<Attention> draft_attention_;  // a draft model's attention, on device_
};

class DecodingConformance : public DecodingFixture {};

// Same seed, same tokens; seed-independent tokens are the greedy ones.
TEST_P(DecodingConformance, DeterministicPerSeedAndLosslessWhenSeedFree) {
  StubRun first;
  const auto a = run(GetParam().given, 1, &first);
  const auto again = run(GetParam().given, 1);
  const auto other = run(GetParam().given, 2);
  EXPECT_EQ(a, again) << "the same seed gave different tokens";
  const RunTimeline& tl = first.result.timeline;
  std::cout << "[          ] drafts: " << tl.spec_proposed << " proposed, " << tl.spec_accepted << " accepted\n";
  if (a == other) {
    EXPECT_EQ(a, greedy_outputs(decoding_workload().requests))
        << "tokens do not depend on the seed, yet differ from greedy decoding: a lossless decoder must reproduce it";
  } else {
    std::cout << "[          ] stochastic with these parameters: tokens depend on the seed\n";
  }
}

// A decoder declaring a device choice (Decoder::device_choice) appends, in accept_for, exactly
// the token the device's choice gives for the same draws (the CPU device's choose_tokens is the
// reference the GPU matches bit for bit): the engine skips accept_for where the device chooses.
TEST_P(DecodingConformance, DeviceChoiceIsWhatAcceptAppends) {
  const Registry& reg = conformance_registry();
  // The case's parameters, and the same at a sampling temperature when the plugin declares one.
  std::vector<std::map<std::string, ParamValue>> variants = {GetParam().given};
  const PluginDescriptor& d = reg.find(PluginKind::kDecoding, GetParam().plugin);
  if (std::any_of(d.params.begin(), d.params.end(),
                  [](const ParamSpec& p) { return p.name == "temperature" && p.type == ::inferlab::ParamType::kFloat; })) {
    variants.push_back(GetParam().given);
    variants.back()["temperature"] = 0.8;
  }
  CpuDevice reference(1);
  int declared = 0;
  for (const auto& given : variants) {
    std::shared_ptr<Decoder> decoder =
        reg.create_decoder(GetParam().plugin, reg.resolve(PluginKind::kDecoding, GetParam().plugin, given, "conformance"),
                           *device_, &draft_source(), draft_attention_.get());
    const TokenChoice choice = decoder->device_choice();
    if (choice.kind == TokenChoice::Kind::kNone) continue;
    ++declared;
    Rng logits_rng(4);
    const std::vector<int> tokens = {1, 2, 3};
    for (int vocab : {64, 300, 1000}) {
      std::vector<float> row(static_cast<std::size_t>(vocab));
      for (int trial = 0; trial < 40; ++trial) {
        for (float& x : row) x = static_cast<float>(2.0 * logits_rng.normal());
        Rng accept_rng(static_cast<std::uint64_t>(trial) + 1), choice_rng(static_cast<std::uint64_t>(trial) + 1);
        std::vector<int> out;
        decoder->accept_for(7, tokens, {}, row.data(), vocab, accept_rng, out);
        const double u = choice.kind == TokenChoice::Kind::kSample ? choice_rng.uniform() : 0.0;
        int want = -1;
        reference.choose_tokens(row.data(), 1, vocab, choice, &u, &want);
        ASSERT_EQ(out, std::vector<int>{want}) << token_choice_name(choice.kind) << ", vocab " << vocab << ", trial "
                                               << trial;
        EXPECT_EQ(accept_rng.next_u64(), choice_rng.next_u64()) << "accept_for drew a different number of uniforms";
      }
      decoder->release(7);
    }
  }
  if (declared == 0) GTEST_SKIP() << "no device choice (host logits always)";
}

INSTANTIATE_TEST_SUITE_P(Plugins, DecodingConformance, ::testing::ValuesIn(plugin_cases(PluginKind::kDecoding)),
                         case_name);
// `inferlab conformance LIB.so` instantiates only the suites of its plugins' kinds.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(DecodingConformance);

class StochasticDecodingConformance : public DecodingFixture {};

// Hot sampling: reproducible for a seed, different for another.
TEST_P(StochasticDecodingConformance, HotTemperatureDependsOnTheSeedOnly) {
  const PluginDescriptor& d = conformance_registry().find(PluginKind::kDecoding, GetParam().plugin);
  const bool has_temperature = std::any_of(d.params.begin(), d.params.end(), [](const ParamSpec& p) {
    return p.name == "temperature" && p.type == ::inferlab::ParamType::kFloat;
  });
  if (!has_temperature) GTEST_SKIP() << GetParam().plugin << " declares no float 'temperature' parameter";
  const std::map<std::string, ParamValue> hot = {{"temperature", kHotTemperature}};
  const auto a = run(hot, 1), again = run(hot, 1), other = run(hot, 2);
  EXPECT_EQ(a, again) << "the same seed gave different tokens";
  EXPECT_NE(a, other) << "temperature " << kHotTemperature << " gave the same tokens for two seeds";
  EXPECT_NE(a, greedy_outputs(decoding_workload().requests));
}

INSTANTIATE_TEST_SUITE_P(Plugins, StochasticDecodingConformance,
                         ::testing::ValuesIn(default_plugin_cases(PluginKind::kDecoding)), case_name);
// `inferlab conformance LIB.so` instantiates only the suites of its plugins' kinds.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(StochasticDecodingConformance);

}  // namespace
}  // namespace inferlab::testing
