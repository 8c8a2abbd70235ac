// The KV cache's shared vocabulary. The cache is split in two (see block_manager.h and
// kv_storage.h): a host BlockManager does the bookkeeping (free list, ref counts, block
// tables, prefix index, copy-on-write as a list of block copies) and a KvStorage holds each
// layer's K/V on the device in a KV dtype. Paged is the only layout; the Orca reservation
// policies (kv_reservation.h) place each sequence's reservation as one contiguous run of blocks.
#pragma once
#include <cstddef>
#include <cstdint>

#include "inferlab/kv/kv_format.h"
#include "inferlab/kv/kv_reservation.h"

namespace inferlab {

struct KvCacheConfig {
  int block_size = 16;     // tokens per block
  int num_blocks = 0;      // blocks in the pool (0 = engine picks from the workload)
  // CUDA only, instead of num_blocks: the share of the GPU's memory the run may use in all; the
  // KV pool gets what the weights and activations leave of it (inferlab/device/gpu_memory.h). 0 = unset.
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


struct KvStats {
  int blocks_total = 0;
  int blocks_reserved = 0;  // allocated to some sequence (distinct blocks)
  int blocks_used = 0;      // holding at least one valid token
  int blocks_free = 0;      // allocatable: never used, or cached and held by no sequence
  int blocks_cached = 0;    // prefix-cached blocks held by no sequence (counted in blocks_free)
  long long tokens_stored = 0;  // valid tokens over all sequences (shared blocks counted once)
};

}  // namespace inferlab

#include "inferlab/kv/block_manager.h"
#include "inferlab/kv/kv_storage.h"
