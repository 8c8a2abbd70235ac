// Field-by-field comparison of two model configs, for the header-only config reads
// (read_model_config) against what the full loaders produce, and of two models' tensors (a
// loader or an exporter's round trip against the weights it started from).
#pragma once
#include <gtest/gtest.h>

#include "inferlab/model/model_config.h"
#include "inferlab/model/weights.h"

namespace inferlab::testing {

inline void expect_same_config(const ModelConfig& a, const ModelConfig& b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.dim, b.dim);
  EXPECT_EQ(a.hidden_dim, b.hidden_dim);
  EXPECT_EQ(a.n_layers, b.n_layers);
  EXPECT_EQ(a.n_heads, b.n_heads);
  EXPECT_EQ(a.n_kv_heads, b.n_kv_heads);
  EXPECT_EQ(a.vocab_size, b.vocab_size);
  EXPECT_EQ(a.max_seq_len, b.max_seq_len);
  EXPECT_EQ(a.rope_theta, b.rope_theta);
  EXPECT_EQ(a.norm_eps, b.norm_eps);
  EXPECT_EQ(a.tied_classifier, b.tied_classifier);
  EXPECT_EQ(a.qkv_bias, b.qkv_bias);
  EXPECT_EQ(a.rope_style, b.rope_style);
  EXPECT_EQ(a.bos_id, b.bos_id);
  EXPECT_EQ(a.eos_id, b.eos_id);
}

// `w` itself when every matrix holds its fp32 values, else `storage` = w materialised (matrices
// held as blocks or seeds filled in), for comparisons field by field.
inline const ModelWeights& with_values(const ModelWeights& w, ModelWeights& storage) {
  if (!w.has_lazy_matrices()) return w;
  storage = w;
  storage.materialize();
  return storage;
}

// Every tensor of a equals e's, bit for bit; matrices held as blocks or seeds by their values.
inline void expect_weights_equal(const ModelWeights& given, const ModelWeights& expected) {
  ModelWeights storage_a, storage_e;
  const ModelWeights& a = with_values(given, storage_a);
  const ModelWeights& e = with_values(expected, storage_e);
  EXPECT_EQ(a.token_embedding, e.token_embedding);
  ASSERT_EQ(a.layers.size(), e.layers.size());
  for (std::size_t l = 0; l < e.layers.size(); ++l) {
    const LayerWeights &x = a.layers[l], &y = e.layers[l];
    EXPECT_EQ(x.attn_norm, y.attn_norm);
    EXPECT_EQ(x.wq, y.wq);
    EXPECT_EQ(x.wk, y.wk);
    EXPECT_EQ(x.wv, y.wv);
    EXPECT_EQ(x.wo, y.wo);
    EXPECT_EQ(x.bq, y.bq);
    EXPECT_EQ(x.bk, y.bk);
    EXPECT_EQ(x.bv, y.bv);
    EXPECT_EQ(x.ffn_norm, y.ffn_norm);
    EXPECT_EQ(x.w1, y.w1);
    EXPECT_EQ(x.w2, y.w2);
    EXPECT_EQ(x.w3, y.w3);
  }
  EXPECT_EQ(a.final_norm, e.final_norm);
  EXPECT_EQ(a.classifier, e.classifier);
}

}  // namespace inferlab::testing
