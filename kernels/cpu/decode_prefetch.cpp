#include "kernels/cpu/decode_prefetch.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>

namespace inferlab::cpu {
namespace {
// INFERLAB_PREFETCH=<bytes> starts with that distance (0: the software prefetch off, the hardware
// prefetcher alone), as INFERLAB_AMX=0 keeps the AMX tiles off: what a whole-model A/B
// (`inferlab bench` in two processes) compares. Clamped to [0, kMaxDecodePrefetch]; anything but
// a plain decimal number keeps the default.
int initial() {
  const char* env = std::getenv("INFERLAB_PREFETCH");
  if (env == nullptr || *env == '\0') return kDecodePrefetch;
  char* end = nullptr;
  const long v = std::strtol(env, &end, 10);
  if (*end != '\0' || v < 0) return kDecodePrefetch;
  return static_cast<int>(std::min<long>(v, kMaxDecodePrefetch));
}
std::atomic<int>& setting() {
  static std::atomic<int> bytes{initial()};
  return bytes;
}
}  // namespace

int set_decode_prefetch(int bytes) { return setting().exchange(std::clamp(bytes, 0, kMaxDecodePrefetch)); }
int decode_prefetch_bytes() { return setting().load(std::memory_order_relaxed); }

}  // namespace inferlab::cpu
