// Host side of the CUDA attention paths (no kernels here): mirroring a device-resident batch to
// the host for the CPU's checks and planning, converting the views to the kernels' structs, and
// laying out one workspace for the work items, merges and partial states.
#if INFERLAB_HAVE_CUDA
#include <algorithm>
#include <string>

#include "plugins/common/attention/attention_plan_cuda.h"
#include "inferlab/device/cuda_device.h"
#include "inferlab/error.h"

namespace inferlab::cuda {

namespace {

template <class T>
std::vector<T> download(std::span<const T> device_span, CudaDevice& device) {
  std::vector<T> host(device_span.size());
  if (!host.empty()) device.copy_to_host(host.data(), device_span.data(), host.size() * sizeof(T));
  return host;
}

std::size_t round_up(std::size_t bytes) { return (bytes + 255) / 256 * 256; }

}  // namespace

HostBatchMirror mirror_batch(const AttentionBatch& device_batch, CudaDevice& device) {
  HostBatchMirror m;
  const AttentionBatch& b = device_batch;
  if (b.host_query_start.size() == b.query_start.size() && b.host_context_len.size() == b.context_len.size() &&
      b.host_block_table.size() == b.block_table.size() && !b.host_query_start.empty()) {
    // The builder kept the host arrays it uploaded: no download, no wait for the GPU.
    m.query_start.assign(b.host_query_start.begin(), b.host_query_start.end());
    m.context_len.assign(b.host_context_len.begin(), b.host_context_len.end());
    m.block_table.assign(b.host_block_table.begin(), b.host_block_table.end());
  } else {
    m.query_start = download(b.query_start, device);
    m.context_len = download(b.context_len, device);
    m.block_table = download(b.block_table, device);
  }
  m.view = device_batch;
  m.view.query_start = m.query_start;
  m.view.context_len = m.context_len;
  m.view.block_table = m.block_table;
  return m;
}

PagedBatch paged_batch(const AttentionBatch& b) {
  PagedBatch p;
  p.query_start = b.query_start.data();
  p.context_len = b.context_len.data();
  p.block_table = b.block_table.data();
  p.n_seqs = b.n_seqs();
  p.max_blocks = b.max_blocks;
  p.n_heads = b.n_heads;
  p.n_kv_heads = b.n_kv_heads;
  p.head_dim = b.head_dim;
  p.scale = b.scale;
  return p;
}

PagedKv paged_kv(const KvLayerView& kv, const char* who) {
  // The CUDA kernels read each side as f32, f16 or bf16 (Device::kv_write_f32 / kv_write_half),
  // or int8 on both sides with one scale per token-head (group = head_dim): the layout
  // Device::kv_write_int8 writes.
  const auto plain = [](KvDtype t) { return t == KvDtype::kF32 || kv_dtype_half(t); };
  const bool int8 = kv.k_dtype == KvDtype::kInt8 && kv.v_dtype == KvDtype::kInt8 &&
                    (kv.group_size == 0 || kv.group_size == kv.head_dim);
  check((plain(kv.k_dtype) && plain(kv.v_dtype)) || int8,
        std::string(who) + ": the CUDA kernels read f32, f16 or bf16 KV, or int8 KV with one scale per " +
            "token-head, not K " + kv_dtype_name(kv.k_dtype) + " / V " + kv_dtype_name(kv.v_dtype) + " (group " +
            std::to_string(kv.group_size) + ")");
  PagedKv p;
  p.k = kv.k;
  p.v = kv.v;
  p.k_scale = kv.k_params;
  p.v_scale = kv.v_params;
  p.k_dtype = kv.k_dtype;
  p.v_dtype = kv.v_dtype;
  p.block_size = kv.block_size;
  return p;
}

void run_tiled_attention(CudaDevice& device, const AttentionBatch& device_batch, const KvLayerView& kv,
                         const float* q, float* out, const std::vector<AttentionItem>& items,
                         const std::vector<AttentionMerge>& merges, long long partial_vectors, int max_item_rows,
                         int tile, const char* who) {
  if (items.empty()) return;
  const auto d = static_cast<std::size_t>(device_batch.head_dim);
  const auto pv = static_cast<std::size_t>(partial_vectors);
  // Workspace: [items | merges | max [pv] | denom [pv] | acc [pv, d]], each 256-byte aligned.
  const std::size_t items_bytes = round_up(items.size() * sizeof(AttentionItem));
  const std::size_t merges_bytes = round_up(merges.size() * sizeof(AttentionMerge));
  const std::size_t state_bytes = round_up(pv * sizeof(float));
  char* ws = static_cast<char*>(
      device.workspace(items_bytes + merges_bytes + 2 * state_bytes + round_up(pv * d * sizeof(float))));
  auto* d_items = reinterpret_cast<AttentionItem*>(ws);
  auto* d_merges = reinterpret_cast<AttentionMerge*>(ws + items_bytes);
  PartialState state;
  if (pv > 0) {
    state.max = reinterpret_cast<float*>(ws + items_bytes + merges_bytes);
    state.denom = reinterpret_cast<float*>(ws + items_bytes + merges_bytes + state_bytes);
    state.acc = reinterpret_cast<float*>(ws + items_bytes + merges_bytes + 2 * state_bytes);
  }
  device.copy_to_device(d_items, items.data(), items.size() * sizeof(AttentionItem));
  if (!merges.empty()) device.copy_to_device(d_merges, merges.data(), merges.size() * sizeof(AttentionMerge));
  const PagedBatch b = paged_batch(device_batch);
  const PagedKv pkv = paged_kv(kv, who);
  tiled_attention(b, pkv, q, out, d_items, static_cast<int>(items.size()), max_item_rows, tile, state,
                  device.stream());
  merge_partial_attention(b, d_merges, static_cast<int>(merges.size()), state, out, device.stream());
}

}  // namespace inferlab::cuda

#endif  // INFERLAB_HAVE_CUDA
