// One engine step flattened into a batch: the rows the model runs, where their K/V go, and the
// attention batch's flat arrays (query_start, context_len, a padded block table) — everything
// a device needs, uploadable in one transfer each. Built only through add_sequence.
#pragma once
#include <span>
#include <vector>

#include "inferlab/plugin/attention.h"

namespace inferlab {

class StepBatch {
 public:
  // Appends one sequence's rows for this step: `tokens` at positions [start, start + n), their
  // K/V written to the slots `table` (the sequence's blocks, block_size tokens each) gives,
  // context_len = start + n. Rows [logits_begin, logits_end) of this sequence (indices into
  // `tokens`) ask for logits; an empty range asks none. Throws Error when the table is too
  // short for start + n positions.
  void add_sequence(std::span<const int> tokens, int start, std::span<const int> table, int block_size,
                    int logits_begin = 0, int logits_end = 0);
  void clear();

  int rows() const { return static_cast<int>(tokens.size()); }
  int n_seqs() const { return static_cast<int>(context_len.size()); }
  // The attention view of the batch for a model with these head counts.
  AttentionBatch attention(int n_heads, int n_kv_heads, int head_dim) const;

  std::vector<int> tokens;       // [rows] token ids
  std::vector<int> positions;    // [rows] position of each row in its sequence
  std::vector<int> slots;        // [rows] physical KV slot each row's K/V is written to
  std::vector<int> query_start = {0};  // [n_seqs + 1] first row of each sequence
  std::vector<int> context_len;  // [n_seqs] tokens in the cache after this step
  std::vector<int> block_table;  // [n_seqs, max_blocks] padded with -1
  int max_blocks = 0;
  std::vector<int> logit_rows;   // rows whose logits are wanted, ascending
};

// Whether `batch` is a decode step as CUDA graphs capture it: at least one sequence, one query
// row each, and every row asking for logits (a prefill chunk, a speculative verification or a
// row without logits runs eagerly).
bool is_decode_step(const StepBatch& batch);

// A decode step padded to `batch_rows` sequences (>= n_seqs) and a block table `width` columns
// wide (>= max_blocks, padded with -1), for replaying a graph captured at that shape. Each
// padding sequence repeats sequence 0 (token, position, slot, context and blocks), so it writes
// the very K/V values sequence 0 writes to the same slot and reads only K/V that exists; its
// logits (rows n_seqs.. of the padded step) are discarded. Throws Error when `batch` is not a
// decode step or the shape is smaller than the batch.
StepBatch padded_decode_step(const StepBatch& batch, int batch_rows, int width);

}  // namespace inferlab
