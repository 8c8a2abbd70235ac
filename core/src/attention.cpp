// The attention-batch contract check every strategy runs first (see inferlab/attention.h).
#include "inferlab/attention.h"

#include <string>

#include "inferlab/error.h"

namespace inferlab {

void check_attention_batch(const AttentionBatch& batch, const KvLayerView& kv, const char* who) {
  const std::string where = std::string(who) + ": ";
  const int n_seqs = batch.n_seqs();
  check(static_cast<int>(batch.query_start.size()) == n_seqs + 1, where + "query_start needs n_seqs + 1 entries");
  check(batch.max_blocks >= 0 && batch.block_table.size() ==
                                     static_cast<std::size_t>(n_seqs) * static_cast<std::size_t>(batch.max_blocks),
        where + "block_table needs n_seqs * max_blocks entries");
  check(batch.n_heads > 0 && batch.n_kv_heads > 0 && batch.n_heads % batch.n_kv_heads == 0,
        where + "n_heads must be a positive multiple of n_kv_heads");
  check(batch.n_kv_heads == kv.n_kv_heads && batch.head_dim == kv.head_dim,
        where + "batch and KV view disagree on n_kv_heads/head_dim");
  check(batch.head_dim > 0 && kv.block_size > 0, where + "head_dim and block_size must be > 0");
  for (int s = 0; s < n_seqs; ++s) {
    const int n_q = batch.query_start[s + 1] - batch.query_start[s];
    check(n_q >= 0 && n_q <= batch.context_len[s],
          where + "seq " + std::to_string(s) + " has more query rows than context");
    const long long blocks_needed = (static_cast<long long>(batch.context_len[s]) + kv.block_size - 1) / kv.block_size;
    check(blocks_needed <= batch.max_blocks, where + "seq " + std::to_string(s) + " block table too short");
    const auto table = batch.table(s);
    for (long long b = 0; b < blocks_needed; ++b) {
      const int block = table[static_cast<std::size_t>(b)];
      check(block >= 0 && (kv.num_blocks <= 0 || block < kv.num_blocks),
            where + "seq " + std::to_string(s) + " reads block " + std::to_string(block) + " outside the pool");
    }
  }
}

}  // namespace inferlab
