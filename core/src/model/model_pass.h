// Model::Pass, one forward's working state (model.cpp), shared with the decode-graph path
// (model_graph.cpp). Internal to core/src/model.
#pragma once
#include <cstdint>
#include <span>

#include "inferlab/model/model.h"

namespace inferlab {

// One forward's working state: the scratch activations of its rows (device memory), the batch's
// arrays as the attention reads them, and the fused and early-exit bookkeeping its stages share.
struct Model::Pass {
  explicit Pass(ComputeDevice& device) : dev(device) {}
  ComputeDevice& dev;
  int rows = 0;
  std::size_t srows = 0;
  float *x = nullptr, *xn = nullptr;             // [rows, dim] residual stream, normed input of a block
  float *q = nullptr, *k = nullptr, *v = nullptr;  // [rows, n_heads | n_kv_heads, head_dim]
  float *att = nullptr, *tmp = nullptr;          // [rows, dim]
  float *h1 = nullptr, *h3 = nullptr;            // [rows, hidden]
  const int* positions = nullptr;                // [rows] device memory
  const int* slots = nullptr;                    // [rows] device memory
  AttentionBatch ab;
  // [device] fuse = true: RMSNorm takes the residual add before it and, when every linear reading
  // its output takes int8 activation blocks, the quantisation after it (one quantisation for
  // wq/wk/wv, one for w1/w3); SwiGLU quantises for w2; RoPE writes K/V. Same results.
  bool fuse = false;
  std::int8_t* act_q = nullptr;  // [rows, max(dim, hidden)] int8 activation blocks
  float* act_s = nullptr;        // [rows, act_blocks(max(dim, hidden))] their scales
  // Fused: the output of the last FFN not yet added to x (the next RMSNorm adds it).
  const float* pending = nullptr;
  // Early exit: whether the plan has exits, the hidden state each exited row left with
  // ([rows, dim]) and the next index into plan_->exit_after.
  bool exits = false;
  float* frozen = nullptr;
  std::size_t next_exit = 0;

  void linear(const Linear& lin, const float* in, float* out) {
    OpScope t(dev, TimeCategory::kLinear);
    lin.forward(in, out, rows, dev);
  }
  void blocks_linear(const Linear& lin, float* out) {
    OpScope t(dev, TimeCategory::kLinear);
    lin.forward_act_blocks(act_q, act_s, out, rows, dev);
  }
  // The linears reading one input (wq/wk/wv, w1/w3) as one group: one pool dispatch where their
  // family can (Linear::try_forward_group: the CPU's packed int8-activation panels), else one
  // forward each, as on a CUDA device. Same results either way.
  void group_linear(std::span<const GroupMember> members, bool act_blocks) {
    OpScope t(dev, TimeCategory::kLinear);
    if (act_blocks)
      forward_group_act_blocks(members, act_q, act_s, rows, dev);
    else
      forward_group(members, xn, rows, dev);
  }
};

}  // namespace inferlab
