// Every attention and every quantization plugin inside the real model and the real Engine (not
// only its kernel in isolation): a small random-weight Llama runs three requests through
// Engine + ModelExecutor on the plugin's device.
// - attention: the greedy tokens equal those of the reference attention (kernels/ref, double
//   accumulation) — a strategy that mis-reads a block table, a chunk or a GQA group changes them;
// - quantization: every request completes with all its tokens, the weights shrink as the
//   format's bits say, and a format at 8 bits or more keeps most greedy tokens of fp32.
#include <gtest/gtest.h>

#include <map>

#include "inferlab/engine/engine.h"
#include "inferlab/model/weights.h"
#include "model_fixtures.h"
#include "plugin_cases.h"
#include "plugins/common/quantization/float_linear.h"

namespace inferlab::testing {
namespace {

const ModelWeights& weights() {
  static const ModelWeights w = [] {
    ModelConfig c = preset_config("stories260k");
    c.n_layers = 2;
    return random_weights(c, 21);
  }();
  return w;
}

std::vector<Request> requests() {
  std::vector<Request> reqs(3);
  for (int i = 0; i < 3; ++i) {
    Request& r = reqs[static_cast<std::size_t>(i)];
    r.id = i;
    for (int t = 0; t < 20 + 23 * i; ++t) r.prompt.push_back(3 + (t * 37 + i * 11) % 500);
    r.max_output = 12;
  }
  return reqs;
}

// Greedy outputs of `attention` and `quant` with the continuous scheduler (chunked prefill with
// a small budget, so chunks, decodes and mixed batches all occur) and 7-token blocks.
RunResult run_stack(Device& device, Attention& attention, Quantization& quant) {
  const Registry& reg = conformance_registry();
  auto sched = reg.create_scheduler(
      "continuous", reg.resolve(PluginKind::kScheduling, "continuous", {{"max_tokens", std::int64_t{24}}}, "t"),
      device);
  auto dec = reg.create_decoder("sampling", reg.resolve(PluginKind::kDecoding, "sampling", {}, "t"), device);
  Model model(weights(), quant, device);
  ModelExecutor executor(model, attention);
  EngineOptions eo;
  eo.kv.block_size = 7;
  return Engine(executor, *sched, *dec, eo).run(requests());
}

class AttentionInTheModel : public ::testing::TestWithParam<PluginCase> {};

TEST_P(AttentionInTheModel, GreedyTokensEqualTheReferenceAttention) {
  std::string why;
  auto device = open_device(GetParam().device, why);
  if (!device) GTEST_SKIP() << why;
  INFERLAB_SKIP_IF_REFUSED(GetParam(), weights().config);
  auto attention = conformance_registry().create_attention(GetParam().plugin, resolve_case(GetParam()), *device);
  // The truth is kernels/ref's attention over fp32 linears on the host, whatever the device.
  CpuDevice host(2);
  RefAttention reference;
  NoQuantization host_fp32;
  const RunResult want = run_stack(host, reference, host_fp32);
  const auto fp32 = none_quantization(*device);
  const RunResult got = run_stack(*device, *attention, *fp32);
  EXPECT_EQ(got.outputs, want.outputs);
}

class QuantizationInTheModel : public ::testing::TestWithParam<PluginCase> {};

TEST_P(QuantizationInTheModel, CompletesAndShrinksTheWeights) {
  std::string why;
  auto device = open_device(GetParam().device, why);
  if (!device) GTEST_SKIP() << why;
  INFERLAB_SKIP_IF_REFUSED(GetParam(), weights().config);
  auto quant = conformance_registry().create_quantization(GetParam().plugin, resolve_case(GetParam()), *device);
  const std::shared_ptr<Attention> attention = reference_attention_on(*device);
  const auto fp32 = none_quantization(*device);
  const RunResult base = run_stack(*device, *attention, *fp32);
  const RunResult got = run_stack(*device, *attention, *quant);
  long long same = 0, total = 0;
  for (std::size_t i = 0; i < got.outputs.size(); ++i) {
    ASSERT_EQ(got.outputs[i].size(), 12u) << "request " << i;
    for (std::size_t t = 0; t < 12; ++t) {
      same += got.outputs[i][t] == base.outputs[i][t];
      ++total;
    }
  }
  const double ratio = static_cast<double>(got.timeline.weights_bytes) / static_cast<double>(base.timeline.weights_bytes);
  EXPECT_LE(ratio, 1.0 + 1e-9);
  // Bytes per weight of one linear as stored decide how close the tokens must stay (8 bits and
  // up: most agree; below that a random-weight model's flat logits may flip, and completing is
  // the claim).
  const auto probe = quant->make_linear("layers.0.wq", std::vector<float>(64 * 64, 0.01f), 64, 64);
  const double bytes_per_weight = static_cast<double>(probe->weight_bytes()) / (64.0 * 64.0);
  if (bytes_per_weight >= 1.0) {
    EXPECT_GE(static_cast<double>(same) / static_cast<double>(total), 0.5) << same << "/" << total;
  }
}

INSTANTIATE_TEST_SUITE_P(Plugins, AttentionInTheModel, ::testing::ValuesIn(plugin_cases(PluginKind::kAttention)),
                         case_name);
// `inferlab conformance LIB.so` instantiates only the suites of its plugins' kinds.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(AttentionInTheModel);
INSTANTIATE_TEST_SUITE_P(Plugins, QuantizationInTheModel,
                         ::testing::ValuesIn(default_plugin_cases(PluginKind::kQuantization)), case_name);
// `inferlab conformance LIB.so` instantiates only the suites of its plugins' kinds.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(QuantizationInTheModel);

}  // namespace
}  // namespace inferlab::testing
