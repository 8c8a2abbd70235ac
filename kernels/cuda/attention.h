// Launchers of the CUDA paged-attention kernels (attention_naive.cu, attention_flash.cu,
// attention_split_k.cu) and their host side (plugins/common/attention/attention_plan_cuda.cpp). Plain C++ declarations, called
// from the plugins' .cpp files under #if INFERLAB_HAVE_CUDA; every pointer is device memory of
// the current CUDA device and every launch is asynchronous on `stream`. Semantics are those of
// inferlab/plugin/attention.h (query rows per sequence, causal by position, GQA head h -> kv head
// h / (n_heads / n_kv_heads)); K/V are f32, f16, bf16 (read as such and widened to float in
// registers) or int8 with one fp32 scale per (slot, kv head), dequantised as each K/V row is
// loaded. Launch failures throw inferlab::Error.
#pragma once
#include <cstddef>
#include <vector>

#include "inferlab/paged_kv.h"

struct CUstream_st;  // cudaStream_t = CUstream_st*: no CUDA header needed to include this file

namespace inferlab::cuda {

// One layer's K/V pool (device memory), as inferlab::KvLayerView describes it.
struct PagedKv {
  const void* k = nullptr;          // [num_blocks * block_size, n_kv_heads, head_dim] of k_dtype
  const void* v = nullptr;          // same, of v_dtype
  const float* k_scale = nullptr;   // int8: [num_blocks * block_size, n_kv_heads]; else null
  const float* v_scale = nullptr;
  KvDtype k_dtype = KvDtype::kF32;  // kF32, kF16, kBf16 or kInt8 (one scale per slot and kv head)
  KvDtype v_dtype = KvDtype::kF32;
  int block_size = 0;
};

// The batch (device arrays) and its head geometry.
struct PagedBatch {
  const int* query_start = nullptr;  // [n_seqs + 1]
  const int* context_len = nullptr;  // [n_seqs]
  const int* block_table = nullptr;  // [n_seqs, max_blocks]
  int n_seqs = 0;
  int max_blocks = 0;
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  float scale = 1.0f;
};

// ---- naive: one thread block per (query row, head); the score row is materialised ---------
// Rows [first_row, first_row + rows) are computed (first_row = query_start[0], rows =
// query_start[n_seqs] - first_row, both known on the host). scores: [rows, n_heads, max_context]
// scratch, max_context >= every context_len.
void naive_attention(const PagedBatch& batch, const PagedKv& kv, const float* q, float* out, float* scores,
                     int first_row, int rows, int max_context, CUstream_st* stream);

// ---- tiled online softmax (flash) and its split-K use ---------------------------------------
// One work item: local query rows [row_begin, row_end) of `seq` (every head of each kv head's
// GQA group) against K/V positions [pos_begin, pos_end), each row clipped causally. The grid is
// (items, n_kv_heads). partial < 0: the item covers the rows' whole causal prefix and writes
// `out` normalised; partial >= 0: it leaves its un-normalised state for kv head h at vector
// partial + h * (row_end - row_begin) * group of `state`, for merge_partial_attention.
struct AttentionItem {
  int seq = 0;
  int row_begin = 0;
  int row_end = 0;
  int pos_begin = 0;
  int pos_end = 0;
  int partial = -1;
};

// Un-normalised softmax states (running max, denominator, weighted V sum) of partial items.
struct PartialState {
  float* max = nullptr;    // [vectors]
  float* denom = nullptr;  // [vectors]
  float* acc = nullptr;    // [vectors, head_dim]
};

// Dynamic shared memory of one tiled block: Q and the accumulators of max_item_rows * group
// vectors, and a K/V tile of `tile` positions.
std::size_t tiled_attention_shared_bytes(int max_item_rows, int group, int tile, int head_dim);
// The opt-in shared memory per block of sm_90 (H100 / H200), the architecture this build targets:
// what the plugins' supports() hold tiled_attention_shared_bytes to before any GPU is asked.
inline constexpr std::size_t kSm90SharedBytesPerBlock = 232448;  // 227 KiB
// The most dynamic shared memory one block may use on the current device (opt-in limit).
std::size_t max_shared_bytes_per_block();
// Number of streaming multiprocessors of the current device.
int multiprocessor_count();

// items: [n_items] device array; max_item_rows >= every item's row count.
void tiled_attention(const PagedBatch& batch, const PagedKv& kv, const float* q, float* out,
                     const AttentionItem* items, int n_items, int max_item_rows, int tile, PartialState state,
                     CUstream_st* stream);

// A split row block: local rows [row_begin, row_begin + rows) of `seq`, `splits` partial items
// whose kv head h state starts at vector partial + (j * n_kv_heads + h) * rows * group for split j.
struct AttentionMerge {
  int seq = 0;
  int row_begin = 0;
  int rows = 0;
  int splits = 0;
  int partial = 0;
};

// Log-sum-exp merge of each split sequence's partial states into `out`: with M the largest
// split max of a vector, out = sum_j e^(max_j - M) acc_j / sum_j e^(max_j - M) denom_j.
// merges: [n_merges] device array. Grid (n_merges, n_kv_heads).
void merge_partial_attention(const PagedBatch& batch, const AttentionMerge* merges, int n_merges,
                             PartialState state, float* out, CUstream_st* stream);

}  // namespace inferlab::cuda
