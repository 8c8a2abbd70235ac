// One engine step flattened into a batch: the rows the model runs and where their K/V go.
#pragma once
#include <span>
#include <vector>

namespace inferlab {

struct StepBatch {
  std::vector<int> tokens;     // [rows] token ids
  std::vector<int> positions;  // [rows] position of each row in its sequence
  std::vector<int> slots;      // [rows] physical KV slot each row's K/V is written to
  std::vector<int> query_start;  // [n_seqs + 1] first row of each sequence
  std::vector<int> context_len;  // [n_seqs] tokens in the cache after this step
  std::vector<std::span<const int>> block_tables;  // [n_seqs]
  std::vector<int> logit_rows;  // rows whose logits are wanted, ascending

  int rows() const { return static_cast<int>(tokens.size()); }
  int n_seqs() const { return static_cast<int>(context_len.size()); }
  void clear() {
    tokens.clear();
    positions.clear();
    slots.clear();
    query_start.assign(1, 0);
    context_len.clear();
    block_tables.clear();
    logit_rows.clear();
  }
};

}  // namespace inferlab
