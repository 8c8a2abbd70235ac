// A decoding strategy that throws from accept() after `after` calls: a failing variant must be
// recorded with its error while the other variants still run and are written.
#include "inferlab/error.h"
#include "inferlab/plugin/plugin.h"
#include "plugins/common/decoding/sampling.h"

namespace {
class ThrowingDecoder final : public inferlab::Decoder {
 public:
  explicit ThrowingDecoder(std::int64_t after) : after_(after) {}
  void accept(std::span<const int>, std::span<const int>, const float* logits, int vocab, inferlab::Rng&,
              std::vector<int>& out) override {
    if (calls_++ >= after_) throw inferlab::Error("throwing decoder: deliberate failure after " + std::to_string(after_) + " calls");
    out.push_back(inferlab::argmax(logits, vocab));
  }

 private:
  std::int64_t after_, calls_ = 0;
};
inferlab::PluginDescriptor describe() {
  inferlab::PluginDescriptor d;
  d.kind = inferlab::PluginKind::kDecoding;
  d.name = "throwing";
  d.version = "0.0.1";
  d.summary = "greedy, then throws (failure-isolation tests)";
  d.params = {{"after", inferlab::ParamType::kInt, std::int64_t{3}, 0.0, std::nullopt, {}, "calls before throwing"}};
  d.devices[inferlab::DeviceKind::kCpu] = [](const inferlab::PluginContext& ctx) {
    return std::make_unique<ThrowingDecoder>(ctx.params.get_int("after"));
  };
  return d;
}
}  // namespace
INFERLAB_PLUGIN(describe)
