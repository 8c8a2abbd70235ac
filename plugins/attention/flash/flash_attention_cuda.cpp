// FlashAttention on a CUDA device: kernels/cuda/attention_flash.cu. The CPU parameters map one
// to one: `query_rows` rows of a sequence form one thread block's work item (times the GQA
// group, all in shared memory), `tile` K/V positions are staged in shared memory per step. A pair
// that does not fit the GPU's shared memory is refused with an Error naming both. With
// decode_split (the default), a sequence whose rows fit one item is split over its context
// (FlashDecoding; the chunk count from the context and the SM count: decode_split.h) and its
// partial states merged by kernels/cuda/attention_split_k.cu.
#include "flash_attention_cuda.h"

#include <algorithm>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "inferlab/device/cuda_device.h"
#include "plugins/common/attention/attention_plan_cuda.h"
#include "plugins/common/attention/decode_split.h"

namespace inferlab::plugins {

void FlashCudaAttention::forward(const AttentionBatch& batch, const KvLayerView& kv, const float* q, float* out,
                                 Device& device) {
  const char* who = "attention 'flash'";
  CudaDevice& cuda = cuda_device(device, who);
  const cuda::HostBatchMirror host = cuda::mirror_batch(batch, cuda);
  check_attention_batch(host.view, kv, who);
  if (cuda.capturing()) {
    // A captured decode step (CUDA graphs) replays at any context length, so its items must not
    // depend on it: no FlashDecoding split (its chunk count follows the context), each item the
    // rows' whole causal prefix.
    std::vector<cuda::AttentionItem> items;
    int max_item_rows = 0;
    for (int s = 0; s < host.view.n_seqs(); ++s) {
      const int n_q = host.view.query_start[s + 1] - host.view.query_start[s];
      for (int r = 0; r < n_q; r += strategy_.query_rows()) {
        const int r_end = std::min(r + strategy_.query_rows(), n_q);
        // The kernel clips pos_end to the last row's position, read from the device's context_len.
        items.push_back({s, r, r_end, 0, std::numeric_limits<int>::max(), -1});
        max_item_rows = std::max(max_item_rows, r_end - r);
      }
    }
    cuda::run_tiled_attention(cuda, batch, kv, q, out, items, {}, 0, max_item_rows, strategy_.tile(), who);
    return;
  }
  const cuda::TiledPlan plan = cuda::flash_plan(host.view, strategy_.query_rows(), decode_split_, cuda.sm_count());
  cuda::run_tiled_attention(cuda, batch, kv, q, out, plan.items, plan.merges, plan.partial_vectors,
                            plan.max_item_rows, strategy_.tile(), who);
}

DeviceImpl flash_cuda() {
  // A thread block holds query_rows x group queries and a K/V tile in shared memory.
  auto supports = [](const SupportQuery& q) {
    std::vector<std::string> reasons;
    if (!q.params.get_bool("lanes"))
      reasons.push_back("lanes = false changes only the CPU kernels (allowed on cuda: lanes = true)");
    if (q.model.n_kv_heads <= 0) return reasons;
    const auto rows = static_cast<int>(q.params.get_int("query_rows"));
    const auto tile = static_cast<int>(q.params.get_int("tile"));
    const std::size_t bytes =
        cuda::tiled_attention_shared_bytes(rows, q.model.n_heads / q.model.n_kv_heads, tile, q.model.head_dim());
    if (bytes > cuda::kSm90SharedBytesPerBlock)
      reasons.push_back("on cuda, query_rows " + std::to_string(rows) + " x " +
                        std::to_string(q.model.n_heads / q.model.n_kv_heads) + " heads and tile " +
                        std::to_string(tile) + " at head_dim " + std::to_string(q.model.head_dim()) + " need " +
                        std::to_string(bytes) + " bytes of shared memory per block; sm_90 allows " +
                        std::to_string(cuda::kSm90SharedBytesPerBlock) + " (lower tile or query_rows)");
    return reasons;
  };
  return {[](const PluginContext& ctx) {
            return std::make_unique<FlashCudaAttention>(static_cast<int>(ctx.params.get_int("tile")),
                                                        static_cast<int>(ctx.params.get_int("query_rows")),
                                                        ctx.params.get_bool("decode_split"));
          },
          supports, {KvDtype::kF32, KvDtype::kF16, KvDtype::kBf16, KvDtype::kInt8}};
}

}  // namespace inferlab::plugins
