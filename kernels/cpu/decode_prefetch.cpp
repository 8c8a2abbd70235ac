#include "kernels/cpu/decode_prefetch.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>

namespace inferlab::cpu {
namespace {
// INFERLAB_PREFETCH=0 starts with the software prefetch off (the hardware prefetcher alone), as
// INFERLAB_AMX=0 keeps the AMX tiles off: what a whole-model A/B (`inferlab bench` in two
// processes) compares. Any other value keeps the default.
int initial() {
  const char* env = std::getenv("INFERLAB_PREFETCH");
  return env != nullptr && std::strcmp(env, "0") == 0 ? 0 : kDecodePrefetch;
}
std::atomic<int>& setting() {
  static std::atomic<int> bytes{initial()};
  return bytes;
}
}  // namespace

int set_decode_prefetch(int bytes) { return setting().exchange(std::clamp(bytes, 0, kMaxDecodePrefetch)); }
int decode_prefetch_bytes() { return setting().load(std::memory_order_relaxed); }

}  // namespace inferlab::cpu
