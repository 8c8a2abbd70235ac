// SplitKAttention's CUDA implementation (split_k_attention_cuda.cpp, compiled only in a CUDA
// build): the descriptor's device map enters split_k_cuda() under kCuda.
#pragma once
#include "inferlab/plugin/plugin.h"
#include "split_k_attention.h"

namespace inferlab::plugins {

class SplitKCudaAttention final : public Attention {
 public:
  // As SplitKAttention's parameters.
  SplitKCudaAttention(int splits, int min_split_tokens, int max_query_rows)
      : strategy_(splits, min_split_tokens, max_query_rows) {}
  // q, out: [rows, n_heads, head_dim] in device memory.
  void forward(const AttentionBatch& batch, const KvLayerView& kv, const float* q, float* out,
               Device& device) override;
  AttentionTraffic traffic(int head_dim) const override { return strategy_.traffic(head_dim); }

 private:
  SplitKAttention strategy_;  // its plan() and what it declares to the simulator
};

// The kCuda entry: SplitKCudaAttention, reading f32 or int8 (one scale per token-head) KV, and
// refusing a GQA group whose tile does not fit a thread block's shared memory.
DeviceImpl split_k_cuda();

}  // namespace inferlab::plugins
