// FlashAttention on a CUDA device: kernels/cuda/attention_flash.cu. The CPU parameters map one
// to one: `query_rows` rows of a sequence form one thread block's work item (times the GQA
// group, all in shared memory), `tile` K/V positions are staged in shared memory per step. A pair
// that does not fit the GPU's shared memory is refused with an Error naming both.
#include "flash_attention.h"

#if INFERLAB_HAVE_CUDA
#include <algorithm>
#include <vector>

#include "inferlab/cuda_device.h"
#include "plugins/common/attention/attention_plan_cuda.h"

namespace inferlab::plugins {

void FlashAttention::forward_cuda(const AttentionBatch& batch, const KvLayerView& kv, const float* q, float* out,
                                  Device& device) {
  const char* who = "attention 'flash'";
  CudaDevice& cuda = cuda_device(device, who);
  const cuda::HostBatchMirror host = cuda::mirror_batch(batch, cuda);
  check_attention_batch(host.view, kv, who);
  std::vector<cuda::AttentionItem> items;
  int max_item_rows = 0;
  for (int s = 0; s < host.view.n_seqs(); ++s) {
    const int n_q = host.view.query_start[s + 1] - host.view.query_start[s];
    const int ctx = host.view.context_len[s];
    for (int r = 0; r < n_q; r += query_rows_) {
      const int r_end = std::min(r + query_rows_, n_q);
      // The rows' whole causal prefix: up to the last row's position.
      items.push_back({s, r, r_end, 0, ctx - n_q + r_end, -1});
      max_item_rows = std::max(max_item_rows, r_end - r);
    }
  }
  cuda::run_tiled_attention(cuda, batch, kv, q, out, items, {}, 0, max_item_rows, tile_, who);
}

}  // namespace inferlab::plugins
#endif  // INFERLAB_HAVE_CUDA
