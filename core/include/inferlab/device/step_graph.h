// CUDA graphs for decode steps ([device] cuda_graphs = true): the device-independent half. A
// decode step (one query row per sequence, every row asking for logits) is padded to a batch
// bucket and a block-table width, and the device work of its forward pass is captured once per
// GraphKey and replayed after the step's inputs are uploaded into the same (static) device
// buffers. This file decides what each step does and owns the captured graphs; the capture and
// replay calls are the CUDA device's (core/src/device/cuda_graph.cu). Host logic only, so the
// policy is tested on any machine (tests/core/test_step_graph.cpp).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "inferlab/device/token_choice.h"
#include "inferlab/kv/kv_format.h"

namespace inferlab {

// The largest padded decode batch that is captured; larger decode steps run eagerly.
inline constexpr int kMaxGraphBatch = 512;

// The padded batch a decode step of `n_seqs` sequences replays: the smallest power of two
// >= n_seqs (1, 2, 4, 8, ...); 0 (run eagerly) when n_seqs < 1 or the bucket would exceed
// max_bucket.
int graph_batch_bucket(int n_seqs, int max_bucket = kMaxGraphBatch);
// The block-table width a step of `max_blocks` columns is padded to: the smallest power of two
// >= max_blocks (at least 1), so a growing context recaptures only when it doubles.
int graph_block_width(int max_blocks);

// What a captured step depends on: the model (its weights and scratch), the KV pool and its
// format (the captured KV writes and attention kernels are the ones of its dtypes: a pool of
// another format at a reused address must not replay them), the attention strategy (the other
// plugins act through the model's linears), whether the device fuses, the padded shape, and the
// token choice it ends with (if any). A step whose key differs in any of these does not replay a
// graph captured for another.
struct GraphKey {
  const void* model = nullptr;
  const void* kv = nullptr;
  const void* attention = nullptr;
  bool fuse = false;
  int batch = 0;        // graph_batch_bucket of the step's sequences
  int block_width = 0;  // graph_block_width of its block table
  KvFormat kv_format;   // the pool's (KvStorage::format())
  // The token choice the step ends with (Model::forward_choosing); kNone: it ends with logits.
  TokenChoice choice;
  bool operator==(const GraphKey&) const = default;
  // The same model, pool (and its format), plugins and fuse flag (any shape).
  bool same_owner(const GraphKey& other) const {
    return model == other.model && kv == other.kv && attention == other.attention && fuse == other.fuse &&
           kv_format == other.kv_format;
  }
};

// A captured sequence of device work; replay() issues it again, asynchronously, reading and
// writing the device addresses it was captured with.
class StepGraph {
 public:
  virtual ~StepGraph() = default;
  virtual void replay() = 0;
};

// The graphs of one model and what each decode step does with them.
//
// Lifetimes: a graph reads and writes the device memory that existed when it was captured (the
// model's scratch, the staged inputs, the KV pool, workspaces). The device counts frees of its
// memory (ComputeDevice::memory_epoch); a graph captured at another epoch may address a freed
// block, so it is dropped before anything else happens. Graphs of another owner (model, pool,
// format, attention, fuse) are dropped when a step of a new owner arrives.
class GraphCache {
 public:
  enum class Action {
    kWarm,     // run the padded step eagerly, then warmed(): every buffer grows before capture
    kCapture,  // capture the padded step, then captured() (null graph: the capture failed)
    kReplay,   // replay graph(key)
    kEager,    // a capture of this key failed at this epoch: run eagerly
  };
  // What the step with `key` does at the device's memory epoch `epoch` (read after its inputs
  // were staged: staging may grow a buffer). Drops stale graphs first (see above).
  Action plan(const GraphKey& key, std::uint64_t epoch);
  // After a kWarm step; `epoch` read after it (the warm-up may have grown buffers).
  void warmed(const GraphKey& key, std::uint64_t epoch);
  // After a kCapture step: the graph (stored, and counted in captures()) or null when the
  // capture failed (the key then runs eagerly until the epoch or the owner changes); `epoch`
  // read after the capture.
  void captured(const GraphKey& key, std::unique_ptr<StepGraph> graph, std::uint64_t epoch);
  // The graph of a key plan() answered kReplay for; counts a replay.
  StepGraph& replay(const GraphKey& key);
  // Drops every graph (the model is going away, or its memory changed under it).
  void clear();

  std::size_t size() const;  // graphs held
  long long captures() const { return captures_; }
  long long replays() const { return replays_; }
  long long invalidations() const { return invalidations_; }  // graphs dropped as stale

 private:
  struct Entry {
    GraphKey key;
    std::uint64_t epoch = 0;
    bool warm = false;    // a padded eager step ran at `epoch`
    bool failed = false;  // a capture failed at `epoch`
    std::unique_ptr<StepGraph> graph;
  };
  Entry* find(const GraphKey& key);
  Entry& entry(const GraphKey& key);
  std::vector<Entry> entries_;
  long long captures_ = 0, replays_ = 0, invalidations_ = 0;
};

}  // namespace inferlab
