// NaiveAttention on a CUDA device: kernels/cuda/attention_naive.cu, one thread block per
// (query row, head), its score row materialised in the device's workspace.
#include "naive_attention_cuda.h"

#include <algorithm>
#include <memory>

#include "inferlab/device/cuda_device.h"
#include "plugins/common/attention/attention_plan_cuda.h"

namespace inferlab::plugins {

void NaiveCudaAttention::forward(const AttentionBatch& batch, const KvLayerView& kv, const float* q, float* out,
                                 Device& device) {
  const char* who = "attention 'naive'";
  CudaDevice& cuda = cuda_device(device, who);
  const cuda::HostBatchMirror host = cuda::mirror_batch(batch, cuda);
  check_attention_batch(host.view, kv, who);
  if (host.view.rows() == 0) return;
  const int first_row = host.view.query_start[0];
  const int rows = host.view.rows() - first_row;
  int max_context = 0;  // longest context of a sequence with rows
  for (int s = 0; s < host.view.n_seqs(); ++s)
    if (host.view.query_start[s + 1] > host.view.query_start[s])
      max_context = std::max(max_context, host.view.context_len[s]);
  if (rows <= 0 || max_context == 0) return;
  // [rows, n_heads, max_context] score rows
  auto* scores = static_cast<float*>(cuda.workspace(static_cast<std::size_t>(rows) * batch.n_heads *
                                                    static_cast<std::size_t>(max_context) * sizeof(float)));
  cuda::naive_attention(cuda::paged_batch(batch), cuda::paged_kv(kv, who), q, out, scores, first_row, rows,
                        max_context, cuda.stream());
}

DeviceImpl naive_cuda() {
  return {[](const PluginContext&) { return std::make_unique<NaiveCudaAttention>(); }, {},
          {KvDtype::kF32, KvDtype::kF16, KvDtype::kBf16, KvDtype::kInt8}};
}

}  // namespace inferlab::plugins
