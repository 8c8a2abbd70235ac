// Reference paged attention: the readable truth every attention strategy is tested against.
// For each sequence, query row and head it scores every visible position (read through the
// block table), applies a max-subtracted softmax and sums V, all accumulated in double.
// Semantics (positions, causality, GQA) are those of inferlab/attention.h.
#pragma once
#include "inferlab/attention.h"
#include "inferlab/kv_cache.h"

namespace inferlab::ref {

// Throws inferlab::Error naming `who` and the first inconsistency: table sizes, head counts,
// a sequence with more query rows than context or a block table too short for its context.
// Cheap (O(n_seqs)); every attention strategy calls it before touching memory.
void check_attention_batch(const AttentionBatch& batch, const KvLayerView& kv, const char* who);

// q:   [rows, n_heads, head_dim]
// out: [rows, n_heads, head_dim]
// Single-threaded, slow on purpose; throws inferlab::Error on an inconsistent batch.
void ref_paged_attention(const AttentionBatch& batch, const KvLayerView& kv, const float* q,
                         float* out);

}  // namespace inferlab::ref
