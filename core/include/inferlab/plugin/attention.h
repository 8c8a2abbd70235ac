// Attention strategy interface. Reads K/V only through block tables (paged is the only layout).
// One batch mixes prefill chunks and decode tokens; several query rows per sequence are the
// norm (chunked prefill, speculative verification); GQA maps head h to kv head
// h / (n_heads / n_kv_heads). The model writes this step's K/V into the cache before the call.
// Every array of the batch is flat and lives where the device wants it, so a whole batch
// uploads in one transfer.
#pragma once
#include <span>

#include "inferlab/device/device.h"
#include "inferlab/kv/kv_cache.h"

namespace inferlab {


// The memory a strategy moves beyond reading Q, each sequence's K/V once (in the KV format's
// bytes) and writing its output: what the simulator charges it (docs/simulation.md, "What a
// strategy costs"). A strategy that does not declare it (the default) cannot be simulated:
// `validate` refuses it on [device] kind = "sim".
struct AttentionTraffic {
  bool declared = false;
  // Bytes per (query row, head, attended key) written to memory and read back: materialised
  // scores S and probabilities P (fp32: S written, read, P written, read = 16); 0 for a tiled
  // online softmax that keeps them on chip.
  double score_bytes = 0;
  // Partial results written and read back to be combined (split-K: each split's output and
  // softmax statistics), for sequences of at most partial_max_rows query rows (0 = any): bytes
  // per (query row, head), and per (query row, head, attended key) when the split count grows
  // with the context.
  double partial_bytes = 0;
  double partial_bytes_per_key = 0;
  int partial_max_rows = 0;
};

class Attention {
 public:
  virtual ~Attention() = default;
  // This strategy's traffic for heads of `head_dim` values (see AttentionTraffic); undeclared
  // by default.
  virtual AttentionTraffic traffic(int head_dim) const {
    (void)head_dim;
    return {};
  }
  // CUDA graphs ([device] cuda_graphs = true): whether forward() may be captured for a decode
  // batch (one query row per sequence) and replayed for later batches of the same n_seqs and
  // max_blocks. It may when its launch shapes and uploads depend only on those two, reading the
  // context lengths and block tables from the batch's device arrays, and it neither waits for the
  // device nor allocates. false (the default): decode steps run eagerly under this strategy.
  virtual bool graph_capturable() const { return false; }
  // q:   [rows, n_heads, head_dim]
  // out: [rows, n_heads, head_dim]
  virtual void forward(const AttentionBatch& batch, const KvLayerView& kv, const float* q, float* out,
                       Device& device) = 0;
};

}  // namespace inferlab
