// The KV cache's shared vocabulary. The cache is split in two (see block_manager.h and
// kv_storage.h): a host BlockManager does the bookkeeping (free list, ref counts, block
// tables, prefix index, copy-on-write as a list of block copies) and a KvStorage holds each
// layer's K/V on the device in a KV dtype. Paged is the only layout; the Orca reservation
// policies (kv_reservation.h) place each sequence's reservation as one contiguous run of blocks.
#pragma once
#include <cstddef>
#include <cstdint>

#include "inferlab/kv_format.h"
#include "inferlab/kv_reservation.h"

namespace inferlab {

struct KvCacheConfig {
  int block_size = 16;     // tokens per block
  int num_blocks = 0;      // blocks in the pool (0 = engine picks from the workload)
  // CUDA only, instead of num_blocks: the share of the GPU's memory the run may use in all; the
  // KV pool gets what the weights and activations leave of it (inferlab/gpu_memory.h). 0 = unset.
  double gpu_memory_fraction = 0;
  // When a sequence's KV space is reserved ([kv] reservation; kv_reservation.h).
  KvReservation reservation = KvReservation::kOnDemand;
  // The longest sequence the kMax / kPow2 policies plan for; 0 = the model's (the engine sets it).
  int max_seq_len = 0;
  bool reserves_ahead() const { return inferlab::reserves_ahead(reservation); }
  bool contiguous() const { return reserves_contiguous(reservation); }
  bool prefix_caching = false;  // keep computed full blocks for reuse by later sequences
  // false = the no-KV-cache baseline: a sequence's K/V are dropped once a step has produced its
  // next token, so every token recomputes the whole sequence (the engine applies this).
  bool enabled = true;
  // How K/V are stored ([kv] dtype, group_size, f32_first_layers, f32_last_layers).
  KvFormat format;
  // > 0: the pool is the blocks of this many MiB of KV storage (num_blocks must then be 0), so
  // a smaller format holds more blocks: floor(memory_mb·2^20 / (kv_bytes_per_token·block_size)).
  int memory_mb = 0;
};

// A block's contents to be copied to another block (copy on write), in every layer.
struct BlockCopy {
  int from = 0;
  int to = 0;
};

// Read-only view of one layer's storage for attention kernels (device memory). Each side
// (K, V) has its own dtype (kv_format.h has the layouts); on a CUDA device only f32 exists.
struct KvLayerView {
  KvDtype k_dtype = KvDtype::kF32;
  KvDtype v_dtype = KvDtype::kF32;
  const void* k = nullptr;  // codes [num_blocks * block_size, n_kv_heads, kv_code_bytes(k_dtype, head_dim)]
  const void* v = nullptr;  // codes [num_blocks * block_size, n_kv_heads, kv_code_bytes(v_dtype, head_dim)]
  const float* k_params = nullptr;  // [num_blocks * block_size, n_kv_heads, kv_param_floats] quantized; else null
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
  // pointer into f32 storage, or the codes dequantized by kv_dequantize_row into `scratch`
  // [head_dim] and `scratch` returned. Attention kernels call it per position of a tile, so
  // quantized KV is dequantized in the tile loop, by the one routine all plugins share.
  const float* k_row(int slot, int kv_head, float* scratch) const {
    return row(k_dtype, k, k_params, slot, kv_head, scratch);
  }
  const float* v_row(int slot, int kv_head, float* scratch) const {
    return row(v_dtype, v, v_params, slot, kv_head, scratch);
  }

 private:
  const float* row(KvDtype dtype, const void* base, const float* params, int slot, int kv_head, float* scratch) const {
    const std::size_t cell = static_cast<std::size_t>(slot) * n_kv_heads + kv_head;
    if (dtype == KvDtype::kF32) return static_cast<const float*>(base) + cell * head_dim;
    kv_dequantize_row(dtype, group_size, static_cast<const unsigned char*>(base) + cell * kv_code_bytes(dtype, head_dim),
                      params + cell * kv_param_floats(dtype, head_dim, group_size), head_dim, scratch);
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
