// Reference paged attention: the readable truth every attention strategy is tested against.
// For each sequence, query row and head it scores every visible position (read through the
// block table), applies a max-subtracted softmax and sums V, all accumulated in double.
// Semantics (positions, causality, GQA) are those of inferlab/plugin/attention.h.
#pragma once
#include "inferlab/paged_kv.h"

namespace inferlab::ref {

// q:   [rows, n_heads, head_dim]
// out: [rows, n_heads, head_dim]
// Any stored KV format: each row read through KvLayerView::k_row / v_row (f32 in place, the others
// widened by the rule every plugin shares). Single-threaded, slow on purpose; throws
// inferlab::Error on an inconsistent batch
// (inferlab::check_attention_batch).
void ref_paged_attention(const AttentionBatch& batch, const KvLayerView& kv, const float* q,
                         float* out);

}  // namespace inferlab::ref
