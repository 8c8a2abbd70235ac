// FlashAttention's CUDA implementation (flash_attention_cuda.cpp, compiled only in a CUDA build):
// the descriptor's device map enters flash_cuda() under kCuda.
#pragma once
#include "flash_attention.h"
#include "inferlab/plugin/plugin.h"

namespace inferlab::plugins {

class FlashCudaAttention final : public Attention {
 public:
  // tile, query_rows: as FlashAttention's (lanes is a CPU parameter: flash_cuda() refuses false);
  // decode_split: few-row sequences split over their context (cuda::flash_plan).
  FlashCudaAttention(int tile, int query_rows, bool decode_split)
      : strategy_(tile, query_rows), decode_split_(decode_split) {}
  // q, out: [rows, n_heads, head_dim] in device memory.
  void forward(const AttentionBatch& batch, const KvLayerView& kv, const float* q, float* out,
               Device& device) override;
  AttentionTraffic traffic(int head_dim) const override { return strategy_.traffic(head_dim); }
  // Its work items end at a sentinel the kernel clips to each row's causal end (from the device
  // context lengths), so a decode batch's items depend on n_seqs only.
  bool graph_capturable() const override { return true; }

 private:
  FlashAttention strategy_;  // the parameters and what it declares to the simulator
  bool decode_split_;
};

// The kCuda entry: FlashCudaAttention, reading f32 or int8 (one scale per token-head) KV, and
// refusing parameters that do not fit a thread block's shared memory.
DeviceImpl flash_cuda();

}  // namespace inferlab::plugins
