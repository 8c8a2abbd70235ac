// StepBatch builder (see inferlab/engine/batch.h).
#include "inferlab/engine/batch.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "inferlab/error.h"

namespace inferlab {

void StepBatch::add_sequence(std::span<const int> seq_tokens, int start, std::span<const int> table,
                             int block_size, int logits_begin, int logits_end) {
  const int n = static_cast<int>(seq_tokens.size());
  check(block_size > 0 && start >= 0, "StepBatch::add_sequence: block_size must be > 0 and start >= 0");
  check(static_cast<long long>(table.size()) * block_size >= static_cast<long long>(start) + n, [&] {
    return "StepBatch::add_sequence: a block table of " + std::to_string(table.size()) + " blocks cannot hold " +
           std::to_string(start + n) + " positions";
  });
  check(logits_begin >= 0 && logits_end <= n && (logits_begin <= logits_end),
        "StepBatch::add_sequence: logits range outside the sequence's rows");
  const int first_row = rows();
  for (int i = 0; i < n; ++i) {
    const int pos = start + i;
    tokens.push_back(seq_tokens[static_cast<std::size_t>(i)]);
    positions.push_back(pos);
    slots.push_back(table[static_cast<std::size_t>(pos / block_size)] * block_size + pos % block_size);
  }
  for (int i = logits_begin; i < logits_end; ++i) logit_rows.push_back(first_row + i);
  query_start.push_back(first_row + n);
  context_len.push_back(start + n);

  // Keep the table padded to the widest sequence: widen the earlier rows when this one is wider.
  const int width = static_cast<int>(table.size());
  const int seqs_before = n_seqs() - 1;
  if (width > max_blocks) {
    std::vector<int> wider(static_cast<std::size_t>(seqs_before) * static_cast<std::size_t>(width), -1);
    for (int s = 0; s < seqs_before; ++s)
      std::copy_n(block_table.begin() + static_cast<std::ptrdiff_t>(s) * max_blocks, max_blocks,
                  wider.begin() + static_cast<std::ptrdiff_t>(s) * width);
    block_table.swap(wider);
    max_blocks = width;
  }
  const std::size_t row = block_table.size();
  block_table.resize(row + static_cast<std::size_t>(max_blocks), -1);
  std::copy(table.begin(), table.end(), block_table.begin() + static_cast<std::ptrdiff_t>(row));
}

void StepBatch::clear() {
  tokens.clear();
  positions.clear();
  slots.clear();
  query_start.assign(1, 0);
  context_len.clear();
  block_table.clear();
  max_blocks = 0;
  logit_rows.clear();
}

AttentionBatch StepBatch::attention(int n_heads, int n_kv_heads, int head_dim) const {
  AttentionBatch ab;
  ab.query_start = query_start;
  ab.context_len = context_len;
  ab.block_table = block_table;
  ab.max_blocks = max_blocks;
  ab.n_heads = n_heads;
  ab.n_kv_heads = n_kv_heads;
  ab.head_dim = head_dim;
  ab.scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  return ab;
}

bool is_decode_step(const StepBatch& batch) {
  const int n = batch.n_seqs();
  if (n < 1 || batch.rows() != n || static_cast<int>(batch.logit_rows.size()) != n) return false;
  for (int s = 0; s < n; ++s)
    if (batch.query_start[static_cast<std::size_t>(s)] != s || batch.logit_rows[static_cast<std::size_t>(s)] != s)
      return false;
  return true;
}

StepBatch padded_decode_step(const StepBatch& batch, int batch_rows, int width) {
  check(is_decode_step(batch), "padded_decode_step: not a decode step (one row with logits per sequence)");
  const int n = batch.n_seqs();
  check(batch_rows >= n && width >= batch.max_blocks, [&] {
    return "padded_decode_step: " + std::to_string(n) + " sequences of " + std::to_string(batch.max_blocks) +
           " blocks do not fit a " + std::to_string(batch_rows) + " x " + std::to_string(width) + " step";
  });
  StepBatch p;
  const auto rows = static_cast<std::size_t>(batch_rows), w = static_cast<std::size_t>(width);
  const auto pad = [rows](const std::vector<int>& v) {
    std::vector<int> out(rows, v.front());  // padding repeats sequence 0
    std::copy(v.begin(), v.end(), out.begin());
    return out;
  };
  p.tokens = pad(batch.tokens);
  p.positions = pad(batch.positions);
  p.slots = pad(batch.slots);
  p.context_len = pad(batch.context_len);
  p.query_start.resize(rows + 1);
  p.logit_rows.resize(rows);
  for (std::size_t s = 0; s <= rows; ++s) p.query_start[s] = static_cast<int>(s);
  for (std::size_t s = 0; s < rows; ++s) p.logit_rows[s] = static_cast<int>(s);
  p.max_blocks = width;
  p.block_table.assign(rows * w, -1);
  const auto old = static_cast<std::size_t>(batch.max_blocks);
  for (std::size_t s = 0; s < rows; ++s) {
    const std::size_t from = s < static_cast<std::size_t>(n) ? s : 0;
    std::copy_n(batch.block_table.begin() + static_cast<std::ptrdiff_t>(from * old), old,
                p.block_table.begin() + static_cast<std::ptrdiff_t>(s * w));
  }
  return p;
}

}  // namespace inferlab
