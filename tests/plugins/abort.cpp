// A decoding strategy that calls std::abort() in accept() after `after` calls (a failed assert
// in a plugin looks the same): an isolated run must record the cell as failed with SIGABRT.
#include <cstdlib>

#include "inferlab/plugin/plugin.h"
#include "plugins/common/decoding/sampling.h"

namespace {
class AbortDecoder final : public inferlab::Decoder {
 public:
  explicit AbortDecoder(std::int64_t after) : after_(after) {}
  void accept(std::span<const int>, std::span<const int>, const float* logits, int vocab, inferlab::Rng&,
              std::vector<int>& out) override {
    if (calls_++ >= after_) std::abort();
    out.push_back(inferlab::argmax(logits, vocab));
  }

 private:
  std::int64_t after_, calls_ = 0;
};
inferlab::PluginDescriptor describe() {
  inferlab::PluginDescriptor d;
  d.kind = inferlab::PluginKind::kDecoding;
  d.name = "abort";
  d.version = "0.0.1";
  d.summary = "greedy, then aborts (isolation tests)";
  d.params = {{"after", inferlab::ParamType::kInt, std::int64_t{3}, 0.0, std::nullopt, {}, "calls before aborting"}};
  d.devices[inferlab::DeviceKind::kCpu] = [](const inferlab::PluginContext& ctx) { return std::make_unique<AbortDecoder>(ctx.params.get_int("after")); };
  return d;
}
}  // namespace
INFERLAB_PLUGIN(describe)
