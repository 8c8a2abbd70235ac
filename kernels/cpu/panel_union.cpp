// Byte-balanced runs over a union of packed matrices' panels: see panel_union.h.
#include "kernels/cpu/panel_union.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <cstdint>
#include <vector>

#include "inferlab/error.h"

namespace inferlab::cpu {
namespace {

// One thread's share of the union, [lo, hi), packed in one word so that its owner (taking
// from the front) and a thief (taking from the back) agree through one compare-exchange.
struct alignas(64) Share {
  std::atomic<std::uint64_t> v{0};
};
std::uint64_t pack(std::uint32_t lo, std::uint32_t hi) { return (std::uint64_t{hi} << 32) | lo; }
std::uint32_t lo_of(std::uint64_t v) { return static_cast<std::uint32_t>(v); }
std::uint32_t hi_of(std::uint64_t v) { return static_cast<std::uint32_t>(v >> 32); }

// The next `claim` panels of the share's front (all of it when claim is 0) into [a, b); false
// once it is empty.
bool claim_front(Share& s, std::uint32_t claim, std::uint32_t& a, std::uint32_t& b) {
  std::uint64_t cur = s.v.load(std::memory_order_acquire);
  for (;;) {
    const std::uint32_t lo = lo_of(cur), hi = hi_of(cur);
    if (lo >= hi) return false;
    const std::uint32_t end = claim == 0 ? hi : std::min(hi, lo + claim);
    if (s.v.compare_exchange_weak(cur, pack(end, hi), std::memory_order_acq_rel, std::memory_order_acquire)) {
      a = lo, b = end;
      return true;
    }
  }
}

// The back half (rounded up to whole claims) of the fullest other share into [a, b); false when
// every share is empty.
bool steal_back(Share* shares, std::size_t parts, std::size_t self, std::uint32_t claim, std::uint32_t& a,
                std::uint32_t& b) {
  for (;;) {
    std::size_t victim = parts;
    std::uint32_t most = 0;
    for (std::size_t t = 0; t < parts; ++t) {
      const std::uint64_t v = shares[t].v.load(std::memory_order_acquire);
      if (t != self && lo_of(v) < hi_of(v) && hi_of(v) - lo_of(v) > most) victim = t, most = hi_of(v) - lo_of(v);
    }
    if (victim == parts) return false;
    std::uint64_t cur = shares[victim].v.load(std::memory_order_acquire);
    const std::uint32_t lo = lo_of(cur), hi = hi_of(cur);
    if (lo >= hi) continue;
    const std::uint32_t half = (hi - lo + 1) / 2;
    const std::uint32_t take = std::min(hi - lo, (half + claim - 1) / claim * claim);
    if (shares[victim].v.compare_exchange_strong(cur, pack(lo, hi - take), std::memory_order_acq_rel,
                                                 std::memory_order_acquire)) {
      a = hi - take, b = hi;
      return true;
    }
  }
}

}  // namespace

void cut_panel_union(std::span<const PanelSpan> members, std::size_t parts, std::span<std::size_t> cuts) {
  check(parts > 0 && cuts.size() == parts + 1, "cut_panel_union: cuts must hold parts + 1 entries, parts > 0");
  std::uint64_t total_bytes = 0;
  std::size_t total = 0;
  for (const PanelSpan& m : members) {
    total_bytes += static_cast<std::uint64_t>(m.panels) * m.panel_bytes;
    total += static_cast<std::size_t>(m.panels);
  }
  std::size_t next = 0;  // the next run whose first panel is not yet known
  std::size_t j = 0;     // panel index in the union
  std::uint64_t before = 0;  // bytes of the panels before j
  for (const PanelSpan& m : members)
    for (int p = 0; p < m.panels; ++p, ++j, before += m.panel_bytes) {
      // The run holding panel j's middle byte: floor((before + bytes / 2) * parts / total_bytes).
      const std::uint64_t mid2 = 2 * before + m.panel_bytes;
      const std::size_t run =
          total_bytes == 0 ? 0
                           : std::min<std::size_t>(parts - 1, static_cast<std::size_t>(mid2 * parts / (2 * total_bytes)));
      while (next <= run) cuts[next++] = j;
    }
  while (next <= parts) cuts[next++] = total;
}

void parallel_for_panel_union(std::span<const PanelSpan> members, std::size_t grain, std::size_t claim,
                              ThreadPool& pool, const std::function<void(int member, int p0, int p1)>& run) {
  std::size_t total = 0;
  for (const PanelSpan& m : members) total += static_cast<std::size_t>(std::max(m.panels, 0));
  if (total == 0) return;
  grain = std::max<std::size_t>(grain, 1);
  const std::size_t parts = std::min(static_cast<std::size_t>(pool.size()), (total + grain - 1) / grain);
  thread_local std::vector<std::size_t> cuts;  // [parts + 1]
  cuts.resize(parts + 1);
  cut_panel_union(members, parts, cuts);
  thread_local std::unique_ptr<Share[]> shares;  // [parts]: the pool's threads use the caller's
  thread_local std::size_t capacity = 0;
  if (capacity < parts) shares = std::make_unique<Share[]>(capacity = parts);
  for (std::size_t t = 0; t < parts; ++t)
    shares[t].v.store(pack(static_cast<std::uint32_t>(cuts[t]), static_cast<std::uint32_t>(cuts[t + 1])),
                      std::memory_order_relaxed);
  Share* const sh = shares.get();
  const auto c = static_cast<std::uint32_t>(claim);
  // Union panels [g0, g1) as runs that each stay in one member.
  auto run_union = [&](std::size_t g0, std::size_t g1) {
    std::size_t offset = 0;  // the member's first panel in the union
    for (std::size_t i = 0; i < members.size() && offset < g1; ++i) {
      const std::size_t panels = static_cast<std::size_t>(std::max(members[i].panels, 0));
      const std::size_t lo = std::max(g0, offset), hi = std::min(g1, offset + panels);
      if (lo < hi) run(static_cast<int>(i), static_cast<int>(lo - offset), static_cast<int>(hi - offset));
      offset += panels;
    }
  };
  pool.parallel_for(parts, [&](std::size_t t0, std::size_t t1) {
    for (std::size_t t = t0; t < t1; ++t) {
      std::uint32_t a = 0, b = 0;
      for (;;) {
        if (claim_front(sh[t], c, a, b)) {
          run_union(a, b);
        } else if (c > 0 && steal_back(sh, parts, t, c, a, b)) {
          sh[t].v.store(pack(a, b), std::memory_order_release);  // the stolen stretch becomes t's share
        } else {
          break;
        }
      }
    }
  }, 1);
}

}  // namespace inferlab::cpu
