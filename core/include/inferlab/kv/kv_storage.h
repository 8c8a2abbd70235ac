// The device half of the paged KV cache: each layer's K and V for every slot of the block
// pool, in one KvFormat (kv_format.h: a dtype per side, int4 group size, layers kept in f32), in
// memory of one Device. Slots are block * block_size + offset, as the BlockManager hands them
// out. Every format on the CPU: int8 and int4 quantized per token as K/V arrive (so a token's
// codes never change), f16 / bf16 rounded to nearest even. On CUDA: f32; f16 or bf16 on both
// sides (layers kept in f32 allowed), written by the device's kv_write_half (or the fused
// RoPE + KV write); int8 with one scale per token-head on both sides of every layer (group_size
// 0 or head_dim, no f32 layers), written by kv_write_int8. Anything else is refused by
// kv_storage_problem with what is allowed.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "inferlab/device/device.h"
#include "inferlab/kv/kv_cache.h"
#include "inferlab/model/model_config.h"

namespace inferlab {

// Why `kind`'s KV storage cannot hold `format` for `model` (the rule above: any format on the
// CPU; on CUDA f32, f16 or bf16 on both sides, or int8 on both sides of every layer with one
// scale per token-head; on the simulated device f32 only, which is what its cost model sizes),
// naming what is allowed there; empty when it can. The planner asks this before a run;
// KvStorage checks it again.
std::string kv_storage_problem(const KvFormat& format, const ModelConfig& model, DeviceKind kind);

class KvStorage {
 public:
  // unused_layers: [n_layers] or empty; a layer marked unused (skipped by a layer plan) gets no
  // memory at all, and layer()/write() on it throw.
  KvStorage(Device& device, const ModelConfig& model, int num_blocks, int block_size, const KvFormat& format = {},
            std::vector<bool> unused_layers = {});

  const KvFormat& format() const { return format_; }
  int num_blocks() const { return num_blocks_; }
  int block_size() const { return block_size_; }
  int slots() const { return num_blocks_ * block_size_; }
  ComputeDevice& device() const { return device_; }

  KvLayerView layer(int l) const;
  // k, v: [rows, n_kv_heads * head_dim] f32, slots: [rows] — all device memory.
  void write(int layer, const float* k, const float* v, const int* slots, int rows);
  // Both sides of `layer` stored f32: their caches [slots, n_kv_heads * head_dim] in k and v,
  // and true (the fused RoPE + KV write stores there directly); false (k, v untouched) otherwise.
  bool f32_layer(int layer, float*& k, float*& v);
  // Both sides of `layer` stored in the same f16 or bf16: that dtype and the caches [slots,
  // n_kv_heads * head_dim] of 2-byte values in k and v, and true (the fused RoPE + KV write
  // stores there); false (outputs untouched) otherwise.
  bool half_layer(int layer, KvDtype& dtype, void*& k, void*& v);
  // Copies each block's K/V in every layer (copy on write).
  void copy_blocks(std::span<const BlockCopy> copies);
  // f32 layers, host-addressable devices only (the CPU): the K (V) vector row of one slot,
  // [n_kv_heads * head_dim]. For tests and tools that fill a cache by hand.
  float* k_slot(int layer, int slot);
  float* v_slot(int layer, int slot);

  std::uint64_t bytes() const;  // storage of the whole pool, params (scales) included
  // K and V of one token over all layers, params included (kv_format.h): f32 2·L·kv_dim·4;
  // f16 / bf16 2·L·kv_dim·2; int8 2·L·(kv_dim + 4·n_kv_heads); int4 g 2·L·n_kv_heads·(head_dim/2 + 8·head_dim/g).
  // unused_layers as for the constructor: those layers count nothing.
  static std::uint64_t bytes_per_token(const ModelConfig& model, const KvFormat& format,
                                       const std::vector<bool>& unused_layers = {});

 private:
  // One side (K or V) of one layer: codes [slots, n_kv_heads, code bytes] and, quantized,
  // params [slots, n_kv_heads, param floats].
  struct Side {
    KvDtype dtype = KvDtype::kF32;
    Buffer codes;
    Buffer params;
  };
  Side make_side(KvDtype dtype);
  // Both sides int8 with one scale per token-head in every layer: the layout Device::kv_write_int8
  // writes, so any device can hold it.
  void write_side(Side& side, const float* x, const int* slots, int rows);
  std::size_t token_bytes(const Side& s) const;   // codes of one slot
  std::size_t token_params(const Side& s) const;  // params (floats) of one slot

  ComputeDevice& device_;
  KvFormat format_;
  int n_layers_, n_kv_heads_, head_dim_, kv_dim_;
  int num_blocks_, block_size_;
  bool held(int l) const { return static_cast<std::size_t>(l) >= unused_.size() || !unused_[static_cast<std::size_t>(l)]; }
  std::vector<bool> unused_;
  std::vector<Side> k_, v_;  // per layer (empty buffers for an unused layer)
};

}  // namespace inferlab
