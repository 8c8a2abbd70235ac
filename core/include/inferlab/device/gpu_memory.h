// Sizing the KV pool from GPU memory (kv.gpu_memory_fraction, like vLLM's
// gpu_memory_utilization): the run may use `fraction` of the GPU's memory in all; what the
// weights (already uploaded), the CUDA context and anything else on the GPU use now, plus a
// reserve for the step's activations, comes off first, and the rest becomes KV blocks.
//   kv_bytes = fraction · total − (total − free_now) − activations
//   blocks   = floor(kv_bytes / bytes_per_block)
// The arithmetic is host logic (tested anywhere); the CUDA device supplies total and free.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "inferlab/model/model_config.h"

namespace inferlab {

class Device;
struct CudaMemoryInfo;

struct GpuMemoryPlan {
  std::uint64_t total = 0;        // the GPU's memory
  std::uint64_t used_before = 0;  // in use when the pool was sized (weights, context, others)
  std::uint64_t weights = 0;      // the model's weights as stored (part of used_before)
  std::uint64_t activations = 0;  // reserved for the largest step's scratch
  std::uint64_t kv = 0;           // the KV pool: blocks · bytes_per_block
  int kv_blocks = 0;
  std::uint64_t free_after() const;  // total − used_before − activations − kv (never below 0)
};

// The plan for `fraction` in (0, 1]. Throws Error saying what took the memory when fewer than
// one block fits.
GpuMemoryPlan plan_kv_from_memory_fraction(double fraction, std::uint64_t total, std::uint64_t free_now,
                                           std::uint64_t weights, std::uint64_t activations,
                                           std::uint64_t bytes_per_block);

// The breakdown measured after a run whose pool was sized otherwise (kv.num_blocks or the
// engine's default): activations = what the caching pool hands out beyond weights and KV,
// free = the GPU's free memory plus the pool's cached blocks.
GpuMemoryPlan measured_gpu_memory(const CudaMemoryInfo& info, std::uint64_t weights, std::uint64_t kv);

// The plan on `device` (the CUDA device; Error naming the device kind otherwise) after the
// model's weights were uploaded, for steps of up to `step_rows` tokens and `logit_rows` logits.
GpuMemoryPlan plan_gpu_kv_pool(Device& device, double fraction, const ModelConfig& model, std::uint64_t weights,
                               int step_rows, int logit_rows, std::uint64_t bytes_per_block);

// Scratch of Model::forward for a step of `rows` tokens and `logit_rows` logits rows (fp32):
// x, xn, q, att, tmp [rows, dim], k, v [rows, kv_dim], h1, h3 [rows, hidden], logits
// [logit_rows, vocab], the half-precision activation copy [rows, max(dim, hidden)], and 64 MiB
// for cuBLAS and attention workspaces.
std::uint64_t activation_bytes_estimate(const ModelConfig& model, int rows, int logit_rows);

// The memory breakdown as metrics (MiB): gpu_total_mb, gpu_weights_mb, gpu_kv_mb,
// gpu_activations_mb, gpu_free_mb — added to each result row of a run on CUDA.
std::vector<std::pair<std::string, double>> gpu_memory_metrics(const GpuMemoryPlan& plan);

}  // namespace inferlab
