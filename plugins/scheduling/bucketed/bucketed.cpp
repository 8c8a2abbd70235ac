#include "bucketed.h"

#include <algorithm>
#include <sstream>

#include "inferlab/error.h"

namespace inferlab::plugins {

namespace {

// Tokens a request feeds through the model over the rest of its life without preemption.
int life_tokens(const SeqView& s) {
  return std::max(s.prompt_len + std::max(s.max_output, 1) - 1 - s.num_computed, s.pending());
}

}  // namespace

BucketedScheduler::BucketedScheduler(int max_batch, std::vector<int> edges) : max_batch_(max_batch), edges_(std::move(edges)) {
  check(max_batch >= 1, "scheduling 'bucketed': max_batch must be >= 1, got " + std::to_string(max_batch));
  for (std::size_t i = 0; i < edges_.size(); ++i)
    check(edges_[i] >= 1 && (i == 0 || edges_[i] > edges_[i - 1]),
          "scheduling 'bucketed': bucket_edges must be strictly increasing positive lengths");
}

std::vector<int> BucketedScheduler::parse_edges(const std::string& text) {
  std::vector<int> edges;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');) {
    std::size_t used = 0;
    long v = -1;
    try {
      v = std::stol(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    while (used < item.size() && (item[used] == ' ' || item[used] == '\t')) ++used;
    if (used == 0 || used != item.size() || v < 1 || v > (1 << 24) || (!edges.empty() && v <= edges.back()))
      throw Error("scheduling 'bucketed': bucket_edges = \"" + text + "\"; expected strictly increasing prompt "
                  "lengths separated by commas, e.g. \"128,512,2048\"");
    edges.push_back(static_cast<int>(v));
  }
  return edges;
}

int BucketedScheduler::bucket_of(int prompt_len) const {
  return static_cast<int>(std::lower_bound(edges_.begin(), edges_.end(), prompt_len) - edges_.begin());
}

ScheduleDecision BucketedScheduler::schedule(const SchedulerInput& in) {
  ScheduleDecision d;
  int free_blocks = in.free_blocks;
  if (!in.running.empty()) {
    // A batch is in flight: advance every member (1 + drafts while blocks allow); admit nothing.
    for (const SeqView& s : in.running) {
      int n = s.pending();
      if (s.in_decode()) n = 1 + std::max(0, std::min(in.max_draft_tokens, s.max_output - s.generated - 1));
      while (n > 0 && in.blocks_to_grow(s, n) > free_blocks) n = s.in_decode() ? n - 1 : 0;
      if (n <= 0) continue;
      free_blocks -= in.blocks_to_grow(s, n);
      d.scheduled.push_back({s.id, n});
    }
    return d;
  }
  // A new batch from the oldest waiting request's bucket; whole lives are counted since a
  // static batch never preempts.
  if (in.waiting.empty()) return d;
  const int bucket = bucket_of(in.waiting.front().prompt_len);
  for (const SeqView& s : in.waiting) {
    if (static_cast<int>(d.scheduled.size()) >= max_batch_) break;
    if (bucket_of(s.prompt_len) != bucket) continue;
    const int need = in.blocks_to_grow(s, life_tokens(s));
    if (need > free_blocks) break;
    free_blocks -= need;
    d.scheduled.push_back({s.id, s.pending()});
  }
  return d;
}

}  // namespace inferlab::plugins
