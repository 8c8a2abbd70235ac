// The panels of several packed matrices that read the same activations (wq/wk/wv, w1/w3), run as
// ONE parallel_for: the members' panels taken in order as one sequence (member 0's, then member
// 1's, ...) and cut into contiguous runs of about equal bytes, one run per thread. A small matrix
// then pays no hand-off of its own, and a thread's share is one stretch of the weights it
// streams front to back, whatever the members' sizes and types. Used by gemm_gguf_group
// (kernels/cpu/gemm_gguf.h) and gemm_panels_int8_group (kernels/cpu/gemm_panels_int8.h).
#pragma once
#include <cstddef>
#include <functional>
#include <span>

#include "inferlab/thread_pool.h"

namespace inferlab::cpu {

// One member: `panels` panels of `panel_bytes` bytes each (what a thread streams for one).
struct PanelSpan {
  int panels;
  std::size_t panel_bytes;
};

// Calls run(member, p0, p1) for member panels [p0, p1) so that every panel of every member is run
// exactly once: the union cut into min(pool.size(), ceil(total panels / grain)) shares of about
// equal bytes, one per thread of the pool (one share, and no dispatch, on the caller when that
// is 1). grain: the fewest panels worth a thread. claim: panels a thread takes from the front of
// its share at a time; a thread whose share is empty takes the back half (whole claims) of the
// fullest other share as its own, so a thread the shared machine delays leaves its last panels
// to the others instead of making them wait (per call, all threads end within a claim or two of
// each other). claim 0: each thread runs its whole share in one call, front to back, and
// nothing moves between threads (the prefills whose cache blocking spans a share's panels).
// A run never crosses a member. `run` must not call parallel_for_panel_union itself (the shares
// live in the caller's thread storage).
void parallel_for_panel_union(std::span<const PanelSpan> members, std::size_t grain, std::size_t claim,
                              ThreadPool& pool, const std::function<void(int member, int p0, int p1)>& run);

// Run t's first panel in the union's numbering, t in [0, parts]: cuts[parts] = total panels.
// Panel j belongs to the run its middle byte falls in when the union's bytes are cut into
// `parts` equal stretches (exposed for its test).
void cut_panel_union(std::span<const PanelSpan> members, std::size_t parts, std::span<std::size_t> cuts);

}  // namespace inferlab::cpu
