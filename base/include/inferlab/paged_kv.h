// Paged KV: the byte layouts of the KV dtypes, the one quantise / dequantise routine every
// writer and every attention kernel shares (a new dtype is one case here plus its bytes), and
// the views an attention kernel reads (KvLayerView: one layer's pool; AttentionBatch: the
// step's sequences, block tables and query rows). Part of the base library, below kernels
// and core: the contract between the engine that owns the blocks and the kernels that read them.
//
// Per layer and side, for `slots` = num_blocks * block_size token slots, H = n_kv_heads,
// D = head_dim, g = group size along head_dim, G = D / g groups per token-head:
//   f32   codes [slots, H, D] float                                       4·D bytes per token-head
//   f16   codes [slots, H, D] IEEE binary16, rounded to nearest even       2·D bytes per token-head
//   bf16  codes [slots, H, D] bfloat16 (the top half of an fp32), rounded to nearest even
//                                                                          2·D bytes per token-head
//         (no params: f16 / bf16 are a narrower float, not a quantization)
//   int8  codes [slots, H, D] int8 (symmetric, q in [-127, 127]),
//         params [slots, H, G] float, per group of g along D: scale = max|x| / 127, x ≈ scale·q
//                                                                          D + 4·G bytes per token-head
//         (g = D is the classic one scale per token-head)
//   int4  codes [slots, H, D/2] uint8, two 4-bit codes per byte (element 2i in the low nibble),
//         params [slots, H, G, 2] float (scale, min) per group of g along D:
//         scale = (max - min) / 15, q = round((x - min) / scale) in [0, 15], x ≈ min + scale·q
//                                                                          D/2 + 8·G bytes per token-head
// Every value is quantized once, when its token is written, from that token's own values only
// (per token, along head_dim), so paged blocks, prefix sharing and copy-on-write need nothing
// special: a slot's codes never change. (KIVI's per-channel keys need the scale of a channel over
// many tokens, which a paged cache cannot know when the first token of a block arrives; see
// docs/architecture.md, "KV formats".)
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>

#include "inferlab/paged_kv_rows.h"

namespace inferlab {

// How one side of one layer's K/V is stored.
enum class KvDtype { kF32, kF16, kInt8, kInt4, kBf16 };
const char* kv_dtype_name(KvDtype dtype);
// int8 / int4: codes with per-group params (scales); f32 / f16 / bf16 store the values themselves.
inline bool kv_dtype_quantized(KvDtype dtype) { return dtype == KvDtype::kInt8 || dtype == KvDtype::kInt4; }
// f16 / bf16: two bytes per value, no params.
inline bool kv_dtype_half(KvDtype dtype) { return dtype == KvDtype::kF16 || dtype == KvDtype::kBf16; }
// Bits per stored element (scales not included).
int kv_dtype_bits(KvDtype dtype);

// Bytes of one token-head's codes and params (scales) in `dtype`, head_dim `d`, group `g` (> 0).
// Inline: KvLayerView::row computes them per position.
inline std::size_t kv_code_bytes(KvDtype dtype, int d) {
  switch (dtype) {
    case KvDtype::kInt8: return static_cast<std::size_t>(d);
    case KvDtype::kInt4: return static_cast<std::size_t>(d) / 2;
    case KvDtype::kF16:
    case KvDtype::kBf16: return 2 * static_cast<std::size_t>(d);
    case KvDtype::kF32: break;
  }
  return 4 * static_cast<std::size_t>(d);
}
inline std::size_t kv_param_floats(KvDtype dtype, int d, int g) {
  if (dtype == KvDtype::kInt8) return static_cast<std::size_t>(d / g);
  if (dtype == KvDtype::kInt4) return 2 * static_cast<std::size_t>(d / g);
  return 0;
}

// One token-head: x [d] -> codes [kv_code_bytes] and params [kv_param_floats] (quantized
// dtypes only; f16 / bf16 round each value to nearest even, as the CUDA writers do, and take no
// params).
void kv_quantize_row(KvDtype dtype, int g, const float* x, int d, void* codes, float* params);
// The inverse: out [d] = the values the codes stand for. The routine every attention plugin's
// tile loop runs (through KvLayerView::k_row / v_row).
void kv_dequantize_row(KvDtype dtype, int g, const void* codes, const float* params, int d, float* out);
// The largest |x - dequantize(quantize(x))| over the row for `dtype`: half a quantization step
// of the coarsest group (0 for f32; for f16 / bf16 half a unit in the last place of the largest
// |x|: max|x| · 2^-11 / 2^-8, plus f16's subnormal step 2^-25). Tests derive their tolerances from it.
float kv_row_error_bound(KvDtype dtype, int g, const float* x, int d);

// Read-only view of one layer's storage for attention kernels (device memory). Each side
// (K, V) has its own dtype (the layouts above); a CUDA device stores f32, f16 or bf16 (the same
// on both sides of a layer) or int8 with one scale per token-head (kv_storage_problem).
struct KvLayerView {
  KvDtype k_dtype = KvDtype::kF32;
  KvDtype v_dtype = KvDtype::kF32;
  const void* k = nullptr;  // codes [num_blocks * block_size, n_kv_heads, kv_code_bytes(k_dtype, head_dim)]
  const void* v = nullptr;  // codes [num_blocks * block_size, n_kv_heads, kv_code_bytes(v_dtype, head_dim)]
  const float* k_params = nullptr;  // [num_blocks * block_size, n_kv_heads, kv_param_floats] int8/int4; else null
  const float* v_params = nullptr;
  int group_size = 0;  // quantized sides: head_dim values per scale (int8) or (scale, min) (int4)
  int num_blocks = 0;
  int block_size = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  bool all_f32() const { return k_dtype == KvDtype::kF32 && v_dtype == KvDtype::kF32; }
  // f32 sides only: start of the K (or V) vector of `kv_head` at a physical slot
  // (block * block_size + offset).
  const float* k_at(int slot, int kv_head) const {
    return static_cast<const float*>(k) + (static_cast<std::size_t>(slot) * n_kv_heads + kv_head) * head_dim;
  }
  const float* v_at(int slot, int kv_head) const {
    return static_cast<const float*>(v) + (static_cast<std::size_t>(slot) * n_kv_heads + kv_head) * head_dim;
  }
  // Any stored dtype, host memory: the K (V) vector of `kv_head` at `slot` as floats — a
  // pointer into f32 storage, or the codes dequantized by kv_dequantize_row's rule into `scratch`
  // [head_dim] and `scratch` returned. Attention kernels call it per position of a tile, so
  // quantized KV is dequantized in the tile loop, by the rule all plugins share (kv_dequantize_row's
  // rows, inline in inferlab/paged_kv_rows.h, 8 values at a time on AVX2). Through that call, plus
  // two more for the row's sizes, a row had cost 4-6 ns more of its 12-18 (Zen 3, 2026-12-07).
  const float* k_row(int slot, int kv_head, float* scratch) const {
    return row(k_dtype, k, k_params, slot, kv_head, scratch);
  }
  const float* v_row(int slot, int kv_head, float* scratch) const {
    return row(v_dtype, v, v_params, slot, kv_head, scratch);
  }

 private:
  const float* row(KvDtype dtype, const void* base, const float* params, int slot, int kv_head, float* scratch) const {
    const std::size_t cell = static_cast<std::size_t>(slot) * n_kv_heads + kv_head;
    const auto* codes = static_cast<const unsigned char*>(base) + cell * kv_code_bytes(dtype, head_dim);
    const float* p = params + cell * kv_param_floats(dtype, head_dim, group_size);
    switch (dtype) {
      case KvDtype::kF32: return reinterpret_cast<const float*>(codes);
      case KvDtype::kInt8:
        kv_dequantize_int8_row(reinterpret_cast<const signed char*>(codes), p, group_size, head_dim, scratch);
        return scratch;
      case KvDtype::kInt4: kv_dequantize_int4_row(codes, p, group_size, head_dim, scratch); return scratch;
      case KvDtype::kF16:
      case KvDtype::kBf16:
        kv_dequantize_half_row(reinterpret_cast<const std::uint16_t*>(codes), dtype == KvDtype::kF16, head_dim, scratch);
        return scratch;
    }
    return scratch;  // not reached: every dtype is a case
  }
};

struct AttentionBatch {
  // Sequence s owns query rows [query_start[s], query_start[s+1]). Its context holds
  // context_len[s] tokens (this step's included); query row i of s sits at position
  // context_len[s] - n_q(s) + i and attends causally to positions [0, that position].
  std::span<const int> query_start;  // [n_seqs + 1]
  std::span<const int> context_len;  // [n_seqs]
  // Row s holds sequence s's physical blocks in order, padded with -1 to max_blocks.
  std::span<const int> block_table;  // [n_seqs, max_blocks]
  int max_blocks = 0;
  // When the three arrays above are device memory (a CUDA step): the same arrays on the host,
  // if whoever built the batch kept them (Model::forward does: they are what it uploaded);
  // empty otherwise. A CUDA strategy plans its launches from these instead of downloading the
  // arrays, which costs three synchronising copies per layer (cuda::mirror_batch).
  std::span<const int> host_query_start;
  std::span<const int> host_context_len;
  std::span<const int> host_block_table;
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  float scale = 1.0f;  // usually 1 / sqrt(head_dim)

  int n_seqs() const { return static_cast<int>(context_len.size()); }
  int rows() const { return query_start.empty() ? 0 : query_start.back(); }
  // Sequence s's row of the block table (max_blocks entries, the used ones first).
  std::span<const int> table(int s) const {
    return block_table.subspan(static_cast<std::size_t>(s) * static_cast<std::size_t>(max_blocks),
                               static_cast<std::size_t>(max_blocks));
  }
};

// Throws inferlab::Error naming `who` and the first inconsistency: array sizes, head counts,
// a sequence with more query rows than context, a block table too short for its context or a
// block outside the pool. Cheap (O(n_seqs)); every attention strategy calls it before touching
// memory.
void check_attention_batch(const AttentionBatch& batch, const KvLayerView& kv, const char* who);

}  // namespace inferlab
