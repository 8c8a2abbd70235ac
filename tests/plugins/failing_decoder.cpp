// A greedy decoding strategy that fails in accept() after `after` calls, built once per way a
// plugin can fail (tests/plugins/CMakeLists.txt defines one of):
//   INFERLAB_FAILURE_THROWING  throws inferlab::Error: a failing variant must be recorded with
//                              its error while the other variants still run and are written;
//   INFERLAB_FAILURE_CRASH     segfaults (a real write through a null pointer): an isolated run
//                              must record the cell as failed with SIGSEGV and keep the rest;
//   INFERLAB_FAILURE_ABORT     calls std::abort() (a failed assert in a plugin looks the same):
//                              an isolated run must record the cell as failed with SIGABRT.
#include <cstdlib>
#include <string>

#include "inferlab/error.h"
#include "test_plugin.h"

namespace {
#if defined(INFERLAB_FAILURE_THROWING)
constexpr const char* kName = "throwing";
constexpr const char* kSummary = "greedy, then throws (failure-isolation tests)";
constexpr const char* kAfterHelp = "calls before throwing";
#elif defined(INFERLAB_FAILURE_CRASH)
constexpr const char* kName = "crash";
constexpr const char* kSummary = "greedy, then segfaults (isolation tests)";
constexpr const char* kAfterHelp = "calls before crashing";
#elif defined(INFERLAB_FAILURE_ABORT)
constexpr const char* kName = "abort";
constexpr const char* kSummary = "greedy, then aborts (isolation tests)";
constexpr const char* kAfterHelp = "calls before aborting";
#else
#error "define INFERLAB_FAILURE_THROWING, INFERLAB_FAILURE_CRASH or INFERLAB_FAILURE_ABORT"
#endif

class FailingDecoder final : public inferlab::test_plugins::HookedGreedyDecoder {
 public:
  explicit FailingDecoder(std::int64_t after) : after_(after) {}

 private:
  void before_token() override {
    if (calls_++ < after_) return;
#if defined(INFERLAB_FAILURE_THROWING)
    throw inferlab::Error("throwing decoder: deliberate failure after " + std::to_string(after_) + " calls");
#elif defined(INFERLAB_FAILURE_CRASH)
    volatile int* volatile target = nullptr;  // volatile: the compiler may not drop the write
    *target = 1;
#else
    std::abort();
#endif
  }
  std::int64_t after_, calls_ = 0;
};
inferlab::PluginDescriptor describe() {
  inferlab::PluginDescriptor d = inferlab::test_plugins::descriptor(inferlab::PluginKind::kDecoding, kName, kSummary);
  d.params = {{"after", inferlab::ParamType::kInt, std::int64_t{3}, 0.0, std::nullopt, {}, kAfterHelp}};
  d.devices[inferlab::DeviceKind::kCpu] = [](const inferlab::PluginContext& ctx) {
    return std::make_unique<FailingDecoder>(ctx.params.get_int("after"));
  };
  return d;
}
}  // namespace
INFERLAB_PLUGIN(describe)
