#include "kernels/cpu/decode_prefetch.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>

namespace inferlab::cpu {
namespace {
// INFERLAB_PREFETCH=<bytes> starts with that distance (0: the software prefetch off, the hardware
// prefetcher alone), as INFERLAB_AMX=0 keeps the AMX tiles off: what a whole-model A/B
// (`inferlab bench` in two processes) compares. A value that is not a byte count in
// [0, kMaxDecodePrefetch] keeps the default and says so on stderr, once (this is read before any
// logger exists).
int initial() {
  const char* env = std::getenv("INFERLAB_PREFETCH");
  if (env == nullptr) return kDecodePrefetch;
  char* end = nullptr;
  const long v = std::strtol(env, &end, 10);
  if (*env == '\0' || *end != '\0' || v < 0 || v > kMaxDecodePrefetch) {
    std::fprintf(stderr, "inferlab: warning: INFERLAB_PREFETCH='%s' is not a byte count in [0, %d]; prefetching %d bytes ahead\n",
                 env, kMaxDecodePrefetch, kDecodePrefetch);
    return kDecodePrefetch;
  }
  return static_cast<int>(v);
}
std::atomic<int>& setting() {
  static std::atomic<int> bytes{initial()};
  return bytes;
}
}  // namespace

int set_decode_prefetch(int bytes) { return setting().exchange(std::clamp(bytes, 0, kMaxDecodePrefetch)); }
int decode_prefetch_bytes() { return setting().load(std::memory_order_relaxed); }

}  // namespace inferlab::cpu
