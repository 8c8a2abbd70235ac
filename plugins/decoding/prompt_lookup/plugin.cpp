// Plugin descriptor for decoding/prompt_lookup.
#include "inferlab/plugin/plugin.h"
#include "prompt_lookup.h"

namespace {

inferlab::PluginDescriptor describe() {
  using namespace inferlab;
  using namespace inferlab::plugins;
  PluginDescriptor d;
  d.kind = PluginKind::kDecoding;
  d.name = "prompt_lookup";
  d.version = "1.0.0";
  d.summary = "Prompt lookup decoding: n-gram drafts copied from the context, greedy verification";
  d.params = {
      {"num_draft", ParamType::kInt, std::int64_t{4}, 1.0, 64.0, {},
       "Most draft tokens proposed (and verified) per step"},
      {"max_ngram", ParamType::kInt, std::int64_t{3}, 1.0, 64.0, {},
       "Longest suffix n-gram looked up (tried first)"},
      {"min_ngram", ParamType::kInt, std::int64_t{1}, 1.0, 64.0, {},
       "Shortest suffix n-gram looked up; must be <= max_ngram"},
  };
  d.supports = [](const SupportQuery& q) {
    std::vector<std::string> reasons;
    if (q.params.get_int("min_ngram") > q.params.get_int("max_ngram"))
      reasons.push_back("min_ngram must be <= max_ngram");
    return reasons;
  };
  d.devices = any_device([](const PluginContext& ctx) -> std::unique_ptr<Decoder> {
    return std::make_unique<PromptLookupDecoder>(static_cast<int>(ctx.params.get_int("num_draft")),
                                                 static_cast<int>(ctx.params.get_int("max_ngram")),
                                                 static_cast<int>(ctx.params.get_int("min_ngram")));
  });
  return d;
}

}  // namespace

INFERLAB_PLUGIN(describe)
