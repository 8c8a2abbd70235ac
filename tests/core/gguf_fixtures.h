// Shared by the GGUF tests: a tiny llama GGUF holding every supported tensor type (with the
// exact values the loader must produce), and small helpers for error tests (error_of: test_support.h).
#pragma once
#include <cstring>
#include <functional>
#include <string>

#include "format_writers.h"
#include "inferlab/error.h"
#include "inferlab/formats/formats.h"
#include "inferlab/support/log.h"
#include "inferlab/model/weights.h"
#include "test_support.h"  // error_of

namespace inferlab::testing {

struct QuietLogs {  // the mutation tests provoke warnings by design
  log::Level saved = log::level();
  QuietLogs() { log::set_level(log::Level::kQuiet); }
  ~QuietLogs() { log::set_level(saved); }
};

struct TinyGguf {
  std::string bytes;
  ModelWeights expected;  // the exact values the loader must produce
  std::uint64_t tensor_bytes = 0;
};

inline TinyGguf tiny_llama_gguf(std::uint32_t version = 3, std::uint64_t alignment = 32) {
  TinyGguf t;
  ModelConfig& c = t.expected.config;
  c.dim = 32, c.hidden_dim = 64, c.n_layers = 1, c.n_heads = 4, c.n_kv_heads = 2, c.vocab_size = 32;
  c.max_seq_len = 128, c.rope_theta = 5000.0f, c.norm_eps = 1e-6f, c.bos_id = 29, c.eos_id = 30;
  GgufBuilder g(version);
  g.string("general.architecture", "llama");
  g.u32("llama.embedding_length", 32);
  g.u32("llama.feed_forward_length", 64);
  g.u32("llama.block_count", 1);
  g.u32("llama.attention.head_count", 4);
  g.u32("llama.attention.head_count_kv", 2);
  g.u32("llama.context_length", 128);
  g.f32("llama.rope.freq_base", 5000.0f);
  g.f32("llama.attention.layer_norm_rms_epsilon", 1e-6f);
  if (alignment != 32) g.u32("general.alignment", static_cast<std::uint32_t>(alignment));
  std::vector<std::string> tokens;
  for (char ch = 'a'; ch <= 'z'; ++ch) tokens.emplace_back(1, ch);
  for (const char* s : {"\xc4\xa0", "ab", "abc", "<s>", "</s>", "\xc4\xa0" "a"}) tokens.emplace_back(s);
  std::vector<std::int32_t> types(32, 1);
  types[29] = types[30] = 3;
  g.string("tokenizer.ggml.model", "gpt2");
  g.strings("tokenizer.ggml.tokens", tokens);
  g.ints("tokenizer.ggml.token_type", types);
  g.strings("tokenizer.ggml.merges", {"a b", "ab c", "\xc4\xa0 a"});
  g.u32("tokenizer.ggml.bos_token_id", 29);
  g.u32("tokenizer.ggml.eos_token_id", 30);

  auto q8_tensor = [&](const std::string& name, std::uint64_t ne0, std::uint64_t ne1, int salt) {
    std::vector<std::int8_t> q(ne0 * ne1);
    std::vector<float> v(q.size());
    for (std::size_t i = 0; i < q.size(); ++i) {
      q[i] = static_cast<std::int8_t>(static_cast<int>((i * 37 + salt) % 255) - 127);
      v[i] = q[i] * 0.25f;
    }
    std::string data = encode_q8_0(q, 0x3400);  // d = 0.25
    t.tensor_bytes += data.size();
    g.tensor(name, {ne0, ne1}, GgmlType::kQ8_0, data);
    return v;
  };
  auto q4_tensor = [&](const std::string& name, std::uint64_t ne0, std::uint64_t ne1, bool with_min) {
    std::vector<std::uint8_t> nib(ne0 * ne1);
    std::vector<float> v(nib.size());
    const std::uint16_t m = 0xBC00;  // -1.0
    for (std::size_t i = 0; i < nib.size(); ++i) {
      nib[i] = static_cast<std::uint8_t>((i * 7 + (with_min ? 1 : 4)) % 16);
      v[i] = with_min ? nib[i] * 0.5f - 1.0f : (nib[i] - 8) * 0.5f;
    }
    std::string data = encode_q4(nib, 0x3800, with_min ? &m : nullptr);  // d = 0.5
    t.tensor_bytes += data.size();
    g.tensor(name, {ne0, ne1}, with_min ? GgmlType::kQ4_1 : GgmlType::kQ4_0, data);
    return v;
  };
  auto half_tensor = [&](const std::string& name, std::uint64_t ne0, std::uint64_t ne1, bool bf16) {
    std::vector<float> v(ne0 * ne1);
    std::string data;
    for (std::size_t i = 0; i < v.size(); ++i) {
      v[i] = static_cast<float>(static_cast<int>(i % 61) - 30) / 16.0f;
      std::uint32_t bits;
      std::memcpy(&bits, &v[i], 4);
      append_pod<std::uint16_t>(data, bf16 ? static_cast<std::uint16_t>(bits >> 16) : fp32_to_fp16(v[i]));
    }
    t.tensor_bytes += data.size();
    g.tensor(name, {ne0, ne1}, bf16 ? GgmlType::kBF16 : GgmlType::kF16, data);
    return v;
  };
  auto f32_tensor = [&](const std::string& name, std::vector<std::uint64_t> dims, float base) {
    std::uint64_t n = 1;
    for (auto d : dims) n *= d;
    std::vector<float> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = base + static_cast<float>(i) / 64.0f;
    t.tensor_bytes += n * sizeof(float);
    g.tensor_f32(name, dims, v);
    return v;
  };
  ModelWeights& w = t.expected;
  w.token_embedding = q8_tensor("token_embd.weight", 32, 32, 0);
  w.layers.resize(1);
  LayerWeights& L = w.layers[0];
  L.attn_norm = f32_tensor("blk.0.attn_norm.weight", {32}, 1.0f);
  L.wq = q4_tensor("blk.0.attn_q.weight", 32, 32, false);
  L.wk = q4_tensor("blk.0.attn_k.weight", 32, 16, true);
  L.wv = half_tensor("blk.0.attn_v.weight", 32, 16, false);
  L.wo = half_tensor("blk.0.attn_output.weight", 32, 32, true);
  L.ffn_norm = f32_tensor("blk.0.ffn_norm.weight", {32}, 0.5f);
  L.w1 = f32_tensor("blk.0.ffn_gate.weight", {32, 64}, -1.0f);
  L.w2 = q8_tensor("blk.0.ffn_down.weight", 64, 32, 5);
  L.w3 = half_tensor("blk.0.ffn_up.weight", 32, 64, false);
  w.final_norm = f32_tensor("output_norm.weight", {32}, 2.0f);
  t.bytes = g.build(alignment);
  return t;
}
}  // namespace inferlab::testing
