// The KV cache's shared vocabulary. The cache is split in two (see block_manager.h and
// kv_storage.h): a host BlockManager does the bookkeeping (free list, ref counts, block
// tables, prefix index, copy-on-write as a list of block copies) and a KvStorage holds each
// layer's K/V on the device in a KV dtype. Paged is the only layout; a block_size >= the
// longest sequence with reserve_full reproduces contiguous pre-allocation.
#pragma once
#include <cstddef>
#include <cstdint>

namespace inferlab {

// How K/V are stored. f32 is implemented; the others are the formats quantized KV storage
// (KIVI-style int8/int4 with per-(slot, kv head) scales) will use.
enum class KvDtype { kF32, kF16, kInt8, kInt4 };
const char* kv_dtype_name(KvDtype dtype);
// Bits per stored element (scales not included).
int kv_dtype_bits(KvDtype dtype);

struct KvCacheConfig {
  int block_size = 16;     // tokens per block
  int num_blocks = 0;      // blocks in the pool (0 = engine picks from the workload)
  // CUDA only, instead of num_blocks: the share of the GPU's memory the run may use in all; the
  // KV pool gets what the weights and activations leave of it (inferlab/gpu_memory.h). 0 = unset.
  double gpu_memory_fraction = 0;
  bool reserve_full = false;  // reserve prompt + max output at admission (contiguous-style)
  bool prefix_caching = false;  // keep computed full blocks for reuse by later sequences
  // false = the no-KV-cache baseline: a sequence's K/V are dropped once a step has produced its
  // next token, so every token recomputes the whole sequence (the engine applies this).
  bool enabled = true;
};

// A block's contents to be copied to another block (copy on write), in every layer.
struct BlockCopy {
  int from = 0;
  int to = 0;
};

// Read-only view of one layer's storage for attention kernels (device memory).
struct KvLayerView {
  KvDtype dtype = KvDtype::kF32;
  const void* k = nullptr;  // [num_blocks, block_size, n_kv_heads, head_dim] of dtype
  const void* v = nullptr;  // [num_blocks, block_size, n_kv_heads, head_dim] of dtype
  const float* k_scale = nullptr;  // [num_blocks * block_size, n_kv_heads] for int8/int4; else null
  const float* v_scale = nullptr;
  int num_blocks = 0;
  int block_size = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  // f32 storage: start of the K (or V) vector of `kv_head` at a physical slot
  // (block * block_size + offset).
  const float* k_at(int slot, int kv_head) const {
    return static_cast<const float*>(k) + (static_cast<std::size_t>(slot) * n_kv_heads + kv_head) * head_dim;
  }
  const float* v_at(int slot, int kv_head) const {
    return static_cast<const float*>(v) + (static_cast<std::size_t>(slot) * n_kv_heads + kv_head) * head_dim;
  }
  // Any dtype this build stores (f32, int8), host memory: the K (V) vector of `kv_head` at
  // `slot` as floats — a pointer into f32 storage, or the int8 codes times their token-head
  // scale written to `scratch` [head_dim] and `scratch` returned. Attention kernels call it per
  // position of a tile, so quantized KV is dequantized in the tile loop.
  const float* k_row(int slot, int kv_head, float* scratch) const { return row(k, k_scale, slot, kv_head, scratch); }
  const float* v_row(int slot, int kv_head, float* scratch) const { return row(v, v_scale, slot, kv_head, scratch); }

 private:
  const float* row(const void* base, const float* scale, int slot, int kv_head, float* scratch) const {
    const std::size_t cell = static_cast<std::size_t>(slot) * n_kv_heads + kv_head;
    if (dtype == KvDtype::kF32) return static_cast<const float*>(base) + cell * head_dim;
    const signed char* codes = static_cast<const signed char*>(base) + cell * head_dim;  // kInt8
    const float s = scale[cell];
    for (int c = 0; c < head_dim; ++c) scratch[c] = s * static_cast<float>(codes[c]);
    return scratch;
  }
};

struct KvStats {
  int blocks_total = 0;
  int blocks_reserved = 0;  // allocated to some sequence (distinct blocks)
  int blocks_used = 0;      // holding at least one valid token
  int blocks_free = 0;      // allocatable: never used, or cached and held by no sequence
  int blocks_cached = 0;    // prefix-cached blocks held by no sequence (counted in blocks_free)
  long long tokens_stored = 0;  // valid tokens over all sequences (shared blocks counted once)
};

}  // namespace inferlab

#include "inferlab/block_manager.h"
#include "inferlab/kv_storage.h"
