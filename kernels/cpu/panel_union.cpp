// Byte-balanced runs over a union of packed matrices' panels: see panel_union.h.
#include "kernels/cpu/panel_union.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "inferlab/error.h"

namespace inferlab::cpu {
namespace {

// Runs per thread: one contiguous share each. (3, the pool's own chunks per thread, which lets
// the first free thread take a delayed one's later runs, decoded SmolLM2 W8A8 at the same speed
// within this shared VM's noise: 153 vs 158 t/s, 2026-12-01.)
constexpr std::size_t kRunsPerThread = 1;

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

void parallel_for_panel_union(std::span<const PanelSpan> members, std::size_t grain, ThreadPool& pool,
                              const std::function<void(int member, int p0, int p1)>& run) {
  std::size_t total = 0;
  for (const PanelSpan& m : members) total += static_cast<std::size_t>(std::max(m.panels, 0));
  if (total == 0) return;
  grain = std::max<std::size_t>(grain, 1);
  const std::size_t parts = std::min(static_cast<std::size_t>(pool.size()) * kRunsPerThread, (total + grain - 1) / grain);
  thread_local std::vector<std::size_t> cuts;  // [parts + 1]
  cuts.resize(parts + 1);
  cut_panel_union(members, parts, cuts);
  const std::size_t* cut = cuts.data();  // the pool's threads read the caller's cuts
  pool.parallel_for(parts, [&](std::size_t t0, std::size_t t1) {
    const std::size_t g0 = cut[t0], g1 = cut[t1];  // union panels [g0, g1)
    std::size_t offset = 0;                        // the member's first panel in the union
    for (std::size_t i = 0; i < members.size() && offset < g1; ++i) {
      const std::size_t panels = static_cast<std::size_t>(members[i].panels);
      const std::size_t lo = std::max(g0, offset), hi = std::min(g1, offset + panels);
      if (lo < hi) run(static_cast<int>(i), static_cast<int>(lo - offset), static_cast<int>(hi - offset));
      offset += panels;
    }
  }, 1);
}

}  // namespace inferlab::cpu
