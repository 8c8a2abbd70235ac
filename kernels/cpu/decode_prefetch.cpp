#include "kernels/cpu/decode_prefetch.h"

#include <algorithm>
#include <atomic>

namespace inferlab::cpu {
namespace {
std::atomic<int>& setting() {
  static std::atomic<int> bytes{kDecodePrefetch};
  return bytes;
}
}  // namespace

int set_decode_prefetch(int bytes) { return setting().exchange(std::clamp(bytes, 0, kMaxDecodePrefetch)); }
int decode_prefetch_bytes() { return setting().load(std::memory_order_relaxed); }

}  // namespace inferlab::cpu
