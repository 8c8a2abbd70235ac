// Host side of the CUDA attention paths, shared by the attention plugins' CUDA classes: mirroring
// a device-resident batch to the host, turning the engine's views into the kernels' launch
// structs (kernels/cuda/attention.h), and running the tiled kernel from a CudaDevice's workspace.
// No device code here; compiled only in a CUDA build (attention_plan_cuda.cpp).
#pragma once
#include <vector>

#include "inferlab/plugin/attention.h"
#include "kernels/cuda/attention.h"

namespace inferlab {
class CudaDevice;
}  // namespace inferlab

namespace inferlab::cuda {

// A host copy of a batch whose arrays are device memory (its host_* arrays when it carries them,
// else three synchronising downloads), so that
// the CPU's checks (check_attention_batch) and work planning run unchanged. `view` is the batch
// with its spans over the vectors below.
struct HostBatchMirror {
  std::vector<int> query_start, context_len, block_table;
  AttentionBatch view;
};
HostBatchMirror mirror_batch(const AttentionBatch& device_batch, CudaDevice& device);

PagedBatch paged_batch(const AttentionBatch& device_batch);
// Throws Error naming `who` for a KV dtype the kernels do not read (f16, int4).
PagedKv paged_kv(const KvLayerView& kv, const char* who);

// Uploads items (and merges) to the device's workspace, with partial states for
// `partial_vectors` vectors, then runs the tiled kernel and, when merges is not empty, the merge
// kernel. q, out: [rows, n_heads, head_dim] device memory.
void run_tiled_attention(CudaDevice& device, const AttentionBatch& device_batch, const KvLayerView& kv,
                         const float* q, float* out, const std::vector<AttentionItem>& items,
                         const std::vector<AttentionMerge>& merges, long long partial_vectors, int max_item_rows,
                         int tile, const char* who);

}  // namespace inferlab::cuda
