// SplitKAttention on a CUDA device (Flash-Decoding): kernels/cuda/attention_flash.cu runs every
// chunk as its own thread block, kernels/cuda/attention_split_k.cu merges them. The parameters
// keep their CPU meaning through plan(): `splits` and `min_split_tokens` as given, and auto's
// "4 items per thread" counts the GPU's streaming multiprocessors as its threads (4 thread
// blocks per SM); `max_query_rows` chooses between the split path and the tiled prefill path.
// Both paths go in row blocks of kPrefillRowBlock rows (the split path merges each block).
#include "split_k_attention_cuda.h"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "inferlab/device/cuda_device.h"
#include "inferlab/error.h"
#include "plugins/common/attention/attention_plan_cuda.h"
#include "plugins/common/attention/decode_split.h"
#include "partial_attention.h"

namespace inferlab::plugins {

void SplitKCudaAttention::forward(const AttentionBatch& batch, const KvLayerView& kv, const float* q, float* out,
                                  Device& device) {
  const char* who = "attention 'split_k'";
  CudaDevice& cuda = cuda_device(device, who);
  const cuda::HostBatchMirror host = cuda::mirror_batch(batch, cuda);
  check_attention_batch(host.view, kv, who);
  const int group = batch.n_heads / batch.n_kv_heads;
  const std::vector<int> splits = strategy_.plan(host.view, cuda.sm_count());
  cuda::TiledPlan plan;
  for (int s = 0; s < host.view.n_seqs(); ++s) {
    const int n_q = host.view.query_start[s + 1] - host.view.query_start[s];
    for (int r = 0; r < n_q; r += SplitKAttention::kPrefillRowBlock)
      cuda::add_row_block(plan, s, r, std::min(r + SplitKAttention::kPrefillRowBlock, n_q), n_q,
                          host.view.context_len[s], splits[static_cast<std::size_t>(s)], batch.n_kv_heads, group);
  }
  cuda::run_tiled_attention(cuda, batch, kv, q, out, plan.items, plan.merges, plan.partial_vectors,
                            SplitKAttention::kPrefillRowBlock, split_k::kPositionTile, who);
}

DeviceImpl split_k_cuda() {
  // A thread block holds 16 rows x group queries and a 64-position K/V tile in shared memory.
  auto supports = [](const SupportQuery& q) {
    std::vector<std::string> reasons;
    if (q.model.n_kv_heads <= 0) return reasons;
    const std::size_t bytes = cuda::tiled_attention_shared_bytes(
        SplitKAttention::kPrefillRowBlock, q.model.n_heads / q.model.n_kv_heads, split_k::kPositionTile,
        q.model.head_dim());
    if (bytes > cuda::kSm90SharedBytesPerBlock)
      reasons.push_back("on cuda, " + std::to_string(q.model.n_heads / q.model.n_kv_heads) +
                        " query heads per kv head at head_dim " + std::to_string(q.model.head_dim()) + " need " +
                        std::to_string(bytes) + " bytes of shared memory per block; sm_90 allows " +
                        std::to_string(cuda::kSm90SharedBytesPerBlock));
    return reasons;
  };
  return {[](const PluginContext& ctx) {
            return std::make_unique<SplitKCudaAttention>(static_cast<int>(ctx.params.get_int("splits")),
                                                         static_cast<int>(ctx.params.get_int("min_split_tokens")),
                                                         static_cast<int>(ctx.params.get_int("max_query_rows")));
          },
          supports, {KvDtype::kF32, KvDtype::kF16, KvDtype::kBf16, KvDtype::kInt8}};
}

}  // namespace inferlab::plugins
