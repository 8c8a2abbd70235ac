// Plugin descriptor for decoding/beam (class in beam_search.h).
#include "beam_search.h"
#include "inferlab/plugin/plugin.h"

namespace {

inferlab::PluginDescriptor describe() {
  using namespace inferlab;
  using namespace inferlab::plugins;
  PluginDescriptor d;
  d.kind = PluginKind::kDecoding;
  d.name = "beam";
  d.version = "1.0.0";
  d.summary = "Beam search over log-softmax scores with a length penalty; beams share the prompt's KV blocks "
              "copy on write";
  d.params = {
      {"width", ParamType::kInt, std::int64_t{4}, 1.0, 32.0, {}, "Beams kept per step (1 = greedy)"},
      {"length_penalty", ParamType::kFloat, 1.0, -4.0, 4.0, {},
       "α: a finished hypothesis of L generated tokens scores logprob / L^α (0 = raw logprob)"},
      {"early_stopping", ParamType::kBool, false, std::nullopt, std::nullopt, {},
       "Stop once `width` hypotheses finished (false: once no live beam can beat the worst of them)"},
  };
  d.devices = any_device([](const PluginContext& ctx) -> std::unique_ptr<Decoder> {
    BeamParams p;
    p.width = static_cast<int>(ctx.params.get_int("width"));
    p.length_penalty = ctx.params.get_float("length_penalty");
    p.early_stopping = ctx.params.get_bool("early_stopping");
    return std::make_unique<BeamSearchDecoder>(p);
  });
  return d;
}

}  // namespace

INFERLAB_PLUGIN(describe)
