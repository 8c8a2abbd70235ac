// Decode-step graph policy (see inferlab/device/step_graph.h).
#include "inferlab/device/step_graph.h"

#include <algorithm>
#include <bit>

#include "inferlab/error.h"

namespace inferlab {

int graph_batch_bucket(int n_seqs, int max_bucket) {
  if (n_seqs < 1) return 0;
  const int bucket = static_cast<int>(std::bit_ceil(static_cast<unsigned>(n_seqs)));
  return bucket <= max_bucket ? bucket : 0;
}

int graph_block_width(int max_blocks) {
  return static_cast<int>(std::bit_ceil(static_cast<unsigned>(std::max(max_blocks, 1))));
}

GraphCache::Entry* GraphCache::find(const GraphKey& key) {
  auto it = std::find_if(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.key == key; });
  return it == entries_.end() ? nullptr : &*it;
}

GraphCache::Entry& GraphCache::entry(const GraphKey& key) {
  if (Entry* e = find(key)) return *e;
  entries_.push_back(Entry{key, 0, false, false, nullptr});
  return entries_.back();
}

GraphCache::Action GraphCache::plan(const GraphKey& key, std::uint64_t epoch) {
  // Stale: another owner's graphs, or graphs of memory freed since they were captured.
  const auto stale = [&](const Entry& e) { return !e.key.same_owner(key) || e.epoch != epoch; };
  for (const Entry& e : entries_)
    if (e.graph && stale(e)) ++invalidations_;
  std::erase_if(entries_, stale);
  const Entry* e = find(key);
  if (e == nullptr || (!e->warm && !e->graph && !e->failed)) return Action::kWarm;
  if (e->graph) return Action::kReplay;
  if (e->failed) return Action::kEager;
  return Action::kCapture;
}

void GraphCache::warmed(const GraphKey& key, std::uint64_t epoch) {
  Entry& e = entry(key);
  e.epoch = epoch;
  e.warm = true;
}

void GraphCache::captured(const GraphKey& key, std::unique_ptr<StepGraph> graph, std::uint64_t epoch) {
  Entry& e = entry(key);
  e.epoch = epoch;
  e.failed = graph == nullptr;
  if (graph) ++captures_;
  e.graph = std::move(graph);
}

StepGraph& GraphCache::replay(const GraphKey& key) {
  Entry* e = find(key);
  check(e != nullptr && e->graph != nullptr, "GraphCache::replay: no graph captured for this key");
  ++replays_;
  return *e->graph;
}

void GraphCache::clear() { entries_.clear(); }

std::size_t GraphCache::size() const {
  return static_cast<std::size_t>(std::count_if(entries_.begin(), entries_.end(), [](const Entry& e) {
    return e.graph != nullptr;
  }));
}

}  // namespace inferlab
