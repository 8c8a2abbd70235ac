// Plugin descriptor for decoding/sampling.
#include "inferlab/plugin/plugin.h"
#include "sampling.h"

namespace {

inferlab::PluginDescriptor describe() {
  using namespace inferlab;
  using namespace inferlab::plugins;
  PluginDescriptor d;
  d.kind = PluginKind::kDecoding;
  d.name = "sampling";
  d.version = "1.0.0";
  d.summary = "Seeded sampling with temperature, top-k and top-p (temperature 0 = greedy)";
  d.params = {
      {"temperature", ParamType::kFloat, 0.0, 0.0, std::nullopt, {},
       "Softmax temperature; 0 picks the argmax"},
      {"top_k", ParamType::kInt, std::int64_t{0}, 0.0, std::nullopt, {},
       "Keep only the k most likely tokens (0 = off)"},
      {"top_p", ParamType::kFloat, 1.0, 1e-9, 1.0, {},
       "Keep the smallest set of most likely tokens whose mass reaches top_p, in (0, 1]"},
      {"n", ParamType::kInt, std::int64_t{1}, 1.0, 64.0, {},
       "Samples per request (parallel sampling), sharing the prompt's KV blocks; each has its own seeded stream"},
  };
  d.devices = any_device([](const PluginContext& ctx) -> std::unique_ptr<Decoder> {
    SamplingParams sp;
    sp.temperature = ctx.params.get_float("temperature");
    sp.top_k = static_cast<int>(ctx.params.get_int("top_k"));
    sp.top_p = ctx.params.get_float("top_p");
    return std::make_unique<SamplingDecoder>(sp, static_cast<int>(ctx.params.get_int("n")));
  });
  return d;
}

}  // namespace

INFERLAB_PLUGIN(describe)
