// A decoding strategy that segfaults (a real write through a null pointer) in accept() after
// `after` calls: an isolated run must record the cell as failed with SIGSEGV and keep the rest.
#include "inferlab/plugin/plugin.h"
#include "plugins/common/decoding/sampling.h"

namespace {
class CrashDecoder final : public inferlab::Decoder {
 public:
  explicit CrashDecoder(std::int64_t after) : after_(after) {}
  void accept(std::span<const int>, std::span<const int>, const float* logits, int vocab, inferlab::Rng&,
              std::vector<int>& out) override {
    if (calls_++ >= after_) {
      volatile int* volatile target = nullptr;  // volatile: the compiler may not drop the write
      *target = 1;
    }
    out.push_back(inferlab::argmax(logits, vocab));
  }

 private:
  std::int64_t after_, calls_ = 0;
};
inferlab::PluginDescriptor describe() {
  inferlab::PluginDescriptor d;
  d.kind = inferlab::PluginKind::kDecoding;
  d.name = "crash";
  d.version = "0.0.1";
  d.summary = "greedy, then segfaults (isolation tests)";
  d.params = {{"after", inferlab::ParamType::kInt, std::int64_t{3}, 0.0, std::nullopt, {}, "calls before crashing"}};
  d.devices[inferlab::DeviceKind::kCpu] = [](const inferlab::PluginContext& ctx) { return std::make_unique<CrashDecoder>(ctx.params.get_int("after")); };
  return d;
}
}  // namespace
INFERLAB_PLUGIN(describe)
