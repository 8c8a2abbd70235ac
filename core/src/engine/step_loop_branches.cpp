// The step loop's branching part: a request of a branching decoder (beam search, n > 1
// samples) runs its prompt as one sequence, then as up to branch_width() sequences that share
// the prompt's K/V blocks. Forks are BlockManager::fork (every block shared, ref counted); the
// first write into a shared, partially filled block copies it (BlockManager::reserve); a
// branch the decoder drops frees its blocks. The scheduler sees one request whose
// SeqView::branches says how many sequences it grows.
#include <algorithm>
#include <string>

#include "inferlab/error.h"
#include "engine/step_loop.h"

namespace inferlab::detail {

void StepLoop::reset_branches(Seq& s) {
  s.tokens = s.req->prompt;
  s.generated = 0;
  s.branches.assign(1, Branch{s.req->id, s.req->prompt});
  s.branch_rngs.clear();
  const std::uint64_t base = mix_seed(options_.seed, static_cast<std::uint64_t>(s.req->id));
  for (int j = 0; j < width_; ++j) s.branch_rngs.emplace_back(mix_seed(base, static_cast<std::uint64_t>(j)));
}

void StepLoop::free_kv(Seq& s) {
  if (width_ == 0) {
    if (blocks_.has(s.req->id)) blocks_.free(s.req->id);
    return;
  }
  for (const Branch& b : s.branches)
    if (blocks_.has(b.kv)) blocks_.free(b.kv);
}

int StepLoop::blocks_held(const Seq& s) const {
  if (width_ == 0 || s.branches.size() <= 1) {
    const int kv = s.branches.empty() ? s.req->id : s.branches.front().kv;
    return blocks_.has(kv) ? static_cast<int>(blocks_.block_table(kv).size()) : 0;
  }
  std::vector<int> ids;
  for (const Branch& b : s.branches)
    if (blocks_.has(b.kv)) ids.insert(ids.end(), blocks_.block_table(b.kv).begin(), blocks_.block_table(b.kv).end());
  std::sort(ids.begin(), ids.end());
  return static_cast<int>(std::unique(ids.begin(), ids.end()) - ids.begin());
}

bool StepLoop::reserve_branches(Seq& s) {
  int target = s.num_computed + 1;
  target = std::max(target, reservation_target(s));
  kv_ids_.clear();
  for (const Branch& b : s.branches) kv_ids_.push_back(b.kv);
  if (!blocks_.can_allocate(blocks_.blocks_needed(kv_ids_, target))) return false;
  for (const Branch& b : s.branches)
    if (!blocks_.reserve(b.kv, target, copies_)) return false;  // cannot happen: counted above
  return true;
}

void StepLoop::add_branches_to_batch(Work& w) {
  RunTimeline& tl = result_.timeline;
  Seq& s = *w.seq;
  const int pos = s.num_computed;  // every branch runs its last token at this position
  for (const Branch& b : s.branches) {
    const int last = b.tokens.back();
    batch_.add_sequence(std::span<const int>(&last, 1), pos, blocks_.block_table(b.kv), kv_config_.block_size, 0, 1);
    tl.branch_blocks_unshared += static_cast<long long>(blocks_.block_table(b.kv).size());
  }
  tl.branch_blocks_held += blocks_held(s);
  const int n = static_cast<int>(s.branches.size());
  decode_tokens_ += n;
  tl.branch_rows += n - 1;
  tl.decode_seq_steps += 1;
}

void StepLoop::commit_branches(Work& w) {
  RunTimeline& tl = result_.timeline;
  Seq& s = *w.seq;
  s.num_computed += w.n_real;
  for (const Branch& b : s.branches) blocks_.set_length(b.kv, s.num_computed);

  std::vector<std::span<const int>> live;
  for (const Branch& b : s.branches) live.emplace_back(b.tokens);
  BranchRequest req;
  req.seq = s.req->id;
  req.prompt_len = static_cast<int>(s.req->prompt.size());
  req.max_output = s.req->max_output;
  req.stop_tokens = options_.stop_tokens;
  {
    OpScope timed(device_, TimeCategory::kSampling);
    decoder_.branch(req, live, logits_.data() + static_cast<std::size_t>(w.logit_offset) * vocab_, vocab_,
                    s.branch_rngs, next_branches_);
  }
  const int n_live = static_cast<int>(s.branches.size());
  if (static_cast<int>(next_branches_.size()) > width_)
    throw Error("decoder returned " + std::to_string(next_branches_.size()) + " branches, its width is " +
                std::to_string(width_));
  if (!next_branches_.empty() && s.generated + 1 > s.req->max_output)
    throw Error("decoder grew request " + std::to_string(s.req->id) + " past its max_output " +
                std::to_string(s.req->max_output));
  for (const BranchStep& b : next_branches_)
    if (b.parent < 0 || b.parent >= n_live || b.token < 0 || b.token >= vocab_)
      throw Error("decoder returned a branch with parent " + std::to_string(b.parent) + " of " +
                  std::to_string(n_live) + " live, token " + std::to_string(b.token));

  // The first child of a branch takes over its K/V; the others fork it. Childless branches
  // free theirs (after the forks, which may read them).
  std::vector<Branch> next;
  std::vector<char> taken(static_cast<std::size_t>(n_live), 0);
  for (const BranchStep& b : next_branches_) {
    const Branch& parent = s.branches[static_cast<std::size_t>(b.parent)];
    Branch child{parent.kv, parent.tokens};
    if (taken[static_cast<std::size_t>(b.parent)]) {
      child.kv = next_kv_++;
      blocks_.fork(parent.kv, child.kv);
      // Only the written blocks are shared: capacity reserved ahead (kv.reservation full) would be
      // copied for nothing on the child's next write.
      blocks_.truncate(child.kv, s.num_computed, false);
    }
    taken[static_cast<std::size_t>(b.parent)] = 1;
    child.tokens.push_back(b.token);
    next.push_back(std::move(child));
  }
  for (int i = 0; i < n_live; ++i)
    if (!taken[static_cast<std::size_t>(i)]) blocks_.free(s.branches[static_cast<std::size_t>(i)].kv);
  s.branches = std::move(next);
  if (!s.branches.empty()) {
    s.generated++;
    s.tokens = s.branches.front().tokens;
    return;
  }

  // The request ends: its sequences are returned whole, best first.
  const std::size_t idx = static_cast<std::size_t>(&s - seqs_.data());
  std::vector<BranchOutput>& outs = result_.sequences[idx];
  decoder_.branch_result(s.req->id, outs);
  if (outs.empty()) throw Error("decoder ended request " + std::to_string(s.req->id) + " with no sequence");
  const std::size_t begin = emitted_tokens_.size();
  for (const BranchOutput& o : outs) {
    const int len = static_cast<int>(o.tokens.size());
    if (len < 1 || len > s.req->max_output)
      throw Error("decoder returned a sequence of " + std::to_string(len) + " tokens for request " +
                  std::to_string(s.req->id) + " (max_output " + std::to_string(s.req->max_output) + ")");
    emitted_tokens_.insert(emitted_tokens_.end(), o.tokens.begin(), o.tokens.end());
    tl.branch_logprob_sum += o.logprob;
  }
  tl.branch_sequences += static_cast<long long>(outs.size());
  result_.outputs[idx] = outs.front().tokens;
  s.finished = true;
  emitted_.push_back({&s, begin, emitted_tokens_.size(), false});
}

}  // namespace inferlab::detail
