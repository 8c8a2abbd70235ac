// NaiveAttention's CUDA implementation (naive_attention_cuda.cpp, compiled only in a CUDA build):
// the descriptor's device map enters naive_cuda() under kCuda.
#pragma once
#include "inferlab/plugin/plugin.h"
#include "naive_attention.h"

namespace inferlab::plugins {

class NaiveCudaAttention final : public Attention {
 public:
  // q, out: [rows, n_heads, head_dim] in device memory. One thread block per (query row, head).
  void forward(const AttentionBatch& batch, const KvLayerView& kv, const float* q, float* out,
               Device& device) override;
  AttentionTraffic traffic(int head_dim) const override { return strategy_.traffic(head_dim); }

 private:
  NaiveAttention strategy_;  // what it declares to the simulator, as on the CPU
};

// The kCuda entry: NaiveCudaAttention, reading f32 or int8 (one scale per token-head) KV.
DeviceImpl naive_cuda();

}  // namespace inferlab::plugins
