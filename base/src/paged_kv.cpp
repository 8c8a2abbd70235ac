// Paged KV in the base library: the dtypes' row routines and the attention-batch contract check
// (inferlab/paged_kv.h).
#include "inferlab/paged_kv.h"
#include "inferlab/paged_kv_rows.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>

#include "inferlab/error.h"
#include "inferlab/ggml_types.h"

namespace inferlab {

const char* kv_dtype_name(KvDtype dtype) {
  switch (dtype) {
    case KvDtype::kF32: return "f32";
    case KvDtype::kF16: return "f16";
    case KvDtype::kBf16: return "bf16";
    case KvDtype::kInt8: return "int8";
    case KvDtype::kInt4: return "int4";
  }
  return "unknown";
}

int kv_dtype_bits(KvDtype dtype) {
  switch (dtype) {
    case KvDtype::kF32: return 32;
    case KvDtype::kF16:
    case KvDtype::kBf16: return 16;
    case KvDtype::kInt8: return 8;
    case KvDtype::kInt4: return 4;
  }
  return 0;
}

void kv_quantize_row(KvDtype dtype, int g, const float* x, int d, void* codes, float* params) {
  if (kv_dtype_half(dtype)) {  // each value rounded to nearest even; no params
    auto* h = static_cast<std::uint16_t*>(codes);
    for (int c = 0; c < d; ++c) h[c] = dtype == KvDtype::kF16 ? fp32_to_fp16(x[c]) : fp32_to_bf16(x[c]);
    return;
  }
  if (dtype == KvDtype::kF32) {
    std::copy(x, x + d, static_cast<float*>(codes));
    return;
  }
  if (dtype == KvDtype::kInt8) {  // per group of g: symmetric, scale = max|x| / 127
    auto* q = static_cast<signed char*>(codes);
    for (int g0 = 0, gi = 0; g0 < d; g0 += g, ++gi) {
      float amax = 0.0f;
      for (int c = g0; c < g0 + g; ++c) amax = std::max(amax, std::fabs(x[c]));
      const float s = amax / 127.0f, inv = s > 0.0f ? 1.0f / s : 0.0f;
      params[gi] = s;
      for (int c = g0; c < g0 + g; ++c) q[c] = static_cast<signed char>(std::clamp(std::lround(x[c] * inv), -127L, 127L));
    }
    return;
  }
  // int4: per group of g, asymmetric min/max over 16 levels.
  auto* q = static_cast<unsigned char*>(codes);
  for (int g0 = 0, gi = 0; g0 < d; g0 += g, ++gi) {
    float lo = x[g0], hi = x[g0];
    for (int c = g0; c < g0 + g; ++c) lo = std::min(lo, x[c]), hi = std::max(hi, x[c]);
    const float s = (hi - lo) / 15.0f, inv = s > 0.0f ? 1.0f / s : 0.0f;
    params[2 * gi] = s;
    params[2 * gi + 1] = lo;
    for (int c = g0; c < g0 + g; c += 2) {
      const long a = std::clamp(std::lround((x[c] - lo) * inv), 0L, 15L);
      const long b = std::clamp(std::lround((x[c + 1] - lo) * inv), 0L, 15L);
      q[c / 2] = static_cast<unsigned char>(a | (b << 4));
    }
  }
}

void kv_dequantize_row(KvDtype dtype, int g, const void* codes, const float* params, int d, float* out) {
  // The rows' definitions are inline in inferlab/paged_kv_rows.h (KvLayerView::row runs them).
  if (kv_dtype_half(dtype)) {
    kv_dequantize_half_row(static_cast<const std::uint16_t*>(codes), dtype == KvDtype::kF16, d, out);
    return;
  }
  if (dtype == KvDtype::kF32) {
    std::copy(static_cast<const float*>(codes), static_cast<const float*>(codes) + d, out);
    return;
  }
  if (dtype == KvDtype::kInt8) {
    kv_dequantize_int8_row(static_cast<const signed char*>(codes), params, g, d, out);
    return;
  }
  kv_dequantize_int4_row(static_cast<const unsigned char*>(codes), params, g, d, out);
}

float kv_row_error_bound(KvDtype dtype, int g, const float* x, int d) {
  if (kv_dtype_half(dtype)) {  // round to nearest: half an ulp of the largest magnitude
    float amax = 0.0f;
    for (int c = 0; c < d; ++c) amax = std::max(amax, std::fabs(x[c]));
    return dtype == KvDtype::kF16 ? amax * 0x1p-11f + 0x1p-25f : amax * 0x1p-8f;
  }
  if (dtype != KvDtype::kInt8 && dtype != KvDtype::kInt4) return 0.0f;
  float worst = 0.0f;
  for (int g0 = 0; g0 < d; g0 += g) {
    float lo = x[g0], hi = x[g0], amax = 0.0f;
    for (int c = g0; c < g0 + g; ++c) lo = std::min(lo, x[c]), hi = std::max(hi, x[c]), amax = std::max(amax, std::fabs(x[c]));
    worst = std::max(worst, dtype == KvDtype::kInt8 ? 0.5f * amax / 127.0f : 0.5f * (hi - lo) / 15.0f);
  }
  return worst;
}

void check_attention_batch(const AttentionBatch& batch, const KvLayerView& kv, const char* who) {
  // Every attention call of every layer runs these checks: the messages are built only when one
  // fails (built eagerly, a string per block of every sequence was a tenth of a short decode's
  // attention time: malloc, free and concatenation in `perf`, Zen 3, 2026-12-07).
  const auto fail = [&](const std::string& what) { throw Error(std::string(who) + ": " + what); };
  const int n_seqs = batch.n_seqs();
  if (static_cast<int>(batch.query_start.size()) != n_seqs + 1) fail("query_start needs n_seqs + 1 entries");
  if (batch.max_blocks < 0 ||
      batch.block_table.size() != static_cast<std::size_t>(n_seqs) * static_cast<std::size_t>(batch.max_blocks))
    fail("block_table needs n_seqs * max_blocks entries");
  if (batch.n_heads <= 0 || batch.n_kv_heads <= 0 || batch.n_heads % batch.n_kv_heads != 0)
    fail("n_heads must be a positive multiple of n_kv_heads");
  if (batch.n_kv_heads != kv.n_kv_heads || batch.head_dim != kv.head_dim)
    fail("batch and KV view disagree on n_kv_heads/head_dim");
  if (batch.head_dim <= 0 || kv.block_size <= 0) fail("head_dim and block_size must be > 0");
  for (int s = 0; s < n_seqs; ++s) {
    const int n_q = batch.query_start[s + 1] - batch.query_start[s];
    if (n_q < 0 || n_q > batch.context_len[s]) fail("seq " + std::to_string(s) + " has more query rows than context");
    const long long blocks_needed = (static_cast<long long>(batch.context_len[s]) + kv.block_size - 1) / kv.block_size;
    if (blocks_needed > batch.max_blocks) fail("seq " + std::to_string(s) + " block table too short");
    const auto table = batch.table(s);
    for (long long b = 0; b < blocks_needed; ++b) {
      const int block = table[static_cast<std::size_t>(b)];
      if (block < 0 || (kv.num_blocks > 0 && block >= kv.num_blocks))
        fail("seq " + std::to_string(s) + " reads block " + std::to_string(block) + " outside the pool");
    }
  }
}

}  // namespace inferlab
