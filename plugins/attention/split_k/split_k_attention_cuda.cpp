// SplitKAttention on a CUDA device (Flash-Decoding): kernels/cuda/attention_flash.cu runs every
// chunk as its own thread block, kernels/cuda/attention_split_k.cu merges them. The parameters
// keep their CPU meaning through plan(): `splits` and `min_split_tokens` as given, and auto's
// "4 items per thread" counts the GPU's streaming multiprocessors as its threads (4 thread
// blocks per SM); `max_query_rows` chooses between the split path and the tiled prefill path.
// Both paths go in row blocks of kPrefillRowBlock rows (the split path merges each block).
#include "split_k_attention.h"

#if INFERLAB_HAVE_CUDA
#include <algorithm>
#include <string>
#include <vector>

#include "inferlab/cuda_device.h"
#include "inferlab/error.h"
#include "plugins/common/attention/attention_plan_cuda.h"
#include "partial_attention.h"

namespace inferlab::plugins {

void SplitKAttention::forward_cuda(const AttentionBatch& batch, const KvLayerView& kv, const float* q, float* out,
                                   Device& device) {
  const char* who = "attention 'split_k'";
  CudaDevice& cuda = cuda_device(device, who);
  const cuda::HostBatchMirror host = cuda::mirror_batch(batch, cuda);
  check_attention_batch(host.view, kv, who);
  const int group = batch.n_heads / batch.n_kv_heads;
  const std::vector<int> splits = plan(host.view, cuda.sm_count());
  std::vector<cuda::AttentionItem> items;
  std::vector<cuda::AttentionMerge> merges;
  long long partial_vectors = 0;
  for (int s = 0; s < host.view.n_seqs(); ++s) {
    const int n_q = host.view.query_start[s + 1] - host.view.query_start[s];
    const int ctx = host.view.context_len[s];
    const int n_split = splits[static_cast<std::size_t>(s)];
    for (int r = 0; r < n_q; r += kPrefillRowBlock) {
      const int r_end = std::min(r + kPrefillRowBlock, n_q);
      if (n_split <= 1) {  // tiled: the rows' whole causal prefix
        items.push_back({s, r, r_end, 0, ctx - n_q + r_end, -1});
        continue;
      }
      const int vectors = (r_end - r) * group;
      merges.push_back({s, r, r_end - r, n_split, static_cast<int>(partial_vectors)});
      for (int j = 0; j < n_split; ++j) {
        // Chunk j: [ctx*j/n, ctx*(j+1)/n), never empty since n <= ctx.
        const auto begin = static_cast<int>(static_cast<long long>(ctx) * j / n_split);
        const auto end = static_cast<int>(static_cast<long long>(ctx) * (j + 1) / n_split);
        items.push_back({s, r, r_end, begin, end,
                         static_cast<int>(partial_vectors + static_cast<long long>(j) * batch.n_kv_heads * vectors)});
      }
      partial_vectors += static_cast<long long>(n_split) * batch.n_kv_heads * vectors;
    }
  }
  check(partial_vectors < (1LL << 31), std::string(who) + ": too many partial states for one batch");
  cuda::run_tiled_attention(cuda, batch, kv, q, out, items, merges, partial_vectors, kPrefillRowBlock,
                            split_k::kPositionTile, who);
}

}  // namespace inferlab::plugins
#endif  // INFERLAB_HAVE_CUDA
