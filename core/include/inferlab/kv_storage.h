// The device half of the paged KV cache: each layer's K and V for every slot of the block
// pool, in one KV dtype, in memory of one Device. Slots are block * block_size + offset, as
// the BlockManager hands them out. f32 or int8 on the CPU and CUDA devices: int8 is symmetric, one fp32 scale
// per (token, KV head) = max|x| / 127 over that head's head_dim values, written as K/V arrive
// (so a token's codes never change). f16 and int4 are refused with a clear error.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "inferlab/device.h"
#include "inferlab/kv_cache.h"
#include "inferlab/model_config.h"

namespace inferlab {

class KvStorage {
 public:
  KvStorage(Device& device, const ModelConfig& model, int num_blocks, int block_size,
            KvDtype dtype = KvDtype::kF32);

  KvDtype dtype() const { return dtype_; }
  int num_blocks() const { return num_blocks_; }
  int block_size() const { return block_size_; }
  int slots() const { return num_blocks_ * block_size_; }
  Device& device() const { return device_; }

  KvLayerView layer(int l) const;
  // k, v: [rows, n_kv_heads * head_dim] f32, slots: [rows] — all device memory.
  void write(int layer, const float* k, const float* v, const int* slots, int rows);
  // Copies each block's K/V in every layer (copy on write).
  void copy_blocks(std::span<const BlockCopy> copies);
  // f32 storage, host-addressable devices only (the CPU): the K (V) vector row of one slot,
  // [n_kv_heads * head_dim]. For tests and tools that fill a cache by hand.
  float* k_slot(int layer, int slot);
  float* v_slot(int layer, int slot);

  std::uint64_t bytes() const;  // storage of the whole pool, scales included
  // K and V of one token over all layers, scales included: f32 2·L·kv_dim·4; int8
  // 2·L·(kv_dim + 4·n_kv_heads).
  static std::uint64_t bytes_per_token(const ModelConfig& model, KvDtype dtype);

 private:
  Device& device_;
  KvDtype dtype_;
  int n_layers_, n_kv_heads_, head_dim_, kv_dim_;
  int num_blocks_, block_size_;
  std::size_t elem_bytes() const;
  std::vector<Buffer> k_, v_;  // per layer: [num_blocks * block_size, kv_dim] of dtype
  std::vector<Buffer> k_scale_, v_scale_;  // int8: per layer [num_blocks * block_size, n_kv_heads]
};

}  // namespace inferlab
