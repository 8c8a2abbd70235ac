// The per-step KV memory breakdown of vLLM's Fig. 2 (Kwon et al. 2023, §2.3): of the slots a
// run holds, which hold token states, which are reserved for tokens still to come, which will
// never be written (internal fragmentation), and which free slots no waiting request can use
// (external fragmentation). The block stats give token states and reserved slots; this adds the
// two fragmentation terms, which need each sequence's final length.
#include <algorithm>

#include "engine/step_loop.h"

namespace inferlab::detail {

long long StepLoop::slots_past_final(const Seq& s) const {
  const int bs = kv_config_.block_size;
  long long internal = 0;
  // Slots of one K/V sequence past the last position its request will ever write: prompt +
  // max_output - 1 (the last output token is never fed back).
  auto past_final = [&](int kv) {
    if (!blocks_.has(kv)) return;
    const int final_len = static_cast<int>(s.req->prompt.size()) + s.req->max_output - 1;
    const int cap = static_cast<int>(blocks_.block_table(kv).size()) * bs;
    internal += std::max(0, cap - std::max(final_len, blocks_.length(kv)));
  };
  if (width_ > 0 && !s.branches.empty())
    for (const Branch& b : s.branches) past_final(b.kv);
  else
    past_final(s.req->id);
  return internal;
}

void StepLoop::measure_kv_breakdown(StepTimeline& st) const {
  const int bs = kv_config_.block_size;
  long long internal = 0;
  for (const Seq* s : running_) internal += slots_past_final(*s);
  // Waiting requests hold no blocks (a prefix-cache hit is taken at admission).
  // Branches share blocks: never count more than the reserved slots left beyond token states.
  const long long spare = static_cast<long long>(st.kv_blocks_reserved) * bs - st.kv_tokens;
  st.kv_slots_internal = std::clamp(internal, 0LL, std::max(0LL, spare));
  st.kv_slots_external = 0;
  if (kv_config_.contiguous() && !waiting_.empty()) {
    const Seq& head = *waiting_.front();
    const int need = blocks_.blocks_for(std::max(reservation_target(head), static_cast<int>(head.tokens.size())));
    st.kv_slots_external = static_cast<long long>(blocks_.fragmented_blocks(need)) * bs;
  }
}

}  // namespace inferlab::detail
