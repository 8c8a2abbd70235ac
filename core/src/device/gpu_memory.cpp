// KV pool sizing from GPU memory (see inferlab/device/gpu_memory.h).
#include "inferlab/device/gpu_memory.h"

#include <algorithm>
#include <cmath>

#include "inferlab/device/cuda_device.h"
#include "inferlab/error.h"

namespace inferlab {

namespace {
std::string mib(std::uint64_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }
}  // namespace

std::uint64_t GpuMemoryPlan::free_after() const {
  const std::uint64_t used = used_before + activations + kv;
  return used >= total ? 0 : total - used;
}

GpuMemoryPlan plan_kv_from_memory_fraction(double fraction, std::uint64_t total, std::uint64_t free_now,
                                           std::uint64_t weights, std::uint64_t activations,
                                           std::uint64_t bytes_per_block) {
  check(fraction > 0.0 && fraction <= 1.0,
        "kv.gpu_memory_fraction = " + std::to_string(fraction) + "; allowed: (0, 1]");
  check(bytes_per_block > 0 && free_now <= total, "plan_kv_from_memory_fraction: bad memory figures");
  GpuMemoryPlan p;
  p.total = total;
  p.used_before = total - free_now;
  p.weights = weights;
  p.activations = activations;
  const double budget = std::floor(fraction * static_cast<double>(total));
  const double room = budget - static_cast<double>(p.used_before) - static_cast<double>(activations);
  const double blocks = room > 0 ? std::floor(room / static_cast<double>(bytes_per_block)) : 0.0;
  if (blocks < 1.0)
    throw Error("kv.gpu_memory_fraction = " + std::to_string(fraction) + " leaves no room for the KV cache: " +
                std::to_string(fraction) + " x " + mib(total) + " = " + mib(static_cast<std::uint64_t>(budget)) +
                ", of which " + mib(p.used_before) + " is in use already (weights " + mib(weights) +
                ") and " + mib(activations) + " is kept for activations; one KV block needs " +
                std::to_string(bytes_per_block) + " bytes (raise the fraction, or set kv.num_blocks)");
  p.kv_blocks = static_cast<int>(std::min(blocks, static_cast<double>(1 << 30)));
  p.kv = static_cast<std::uint64_t>(p.kv_blocks) * bytes_per_block;
  return p;
}

GpuMemoryPlan plan_gpu_kv_pool(Device& device, double fraction, const ModelConfig& model, std::uint64_t weights,
                               int step_rows, int logit_rows, std::uint64_t bytes_per_block) {
  check(device.kind() == DeviceKind::kCuda,
        "kv.gpu_memory_fraction sizes the KV pool from GPU memory; this run's device is " +
            std::string(device_kind_name(device.kind())) + " (allowed: cuda; elsewhere set kv.num_blocks)");
  const CudaMemoryInfo mem = cuda_memory_info(device);
  // The pool's cached blocks are free for the KV pool too.
  return plan_kv_from_memory_fraction(fraction, mem.total, std::min(mem.total, mem.free + mem.pool_cached), weights,
                                      activation_bytes_estimate(model, step_rows, logit_rows), bytes_per_block);
}

GpuMemoryPlan measured_gpu_memory(const CudaMemoryInfo& info, std::uint64_t weights, std::uint64_t kv) {
  GpuMemoryPlan p;
  p.total = info.total;
  p.weights = weights;
  p.kv = kv;
  p.activations = info.pool_in_use > weights + kv ? info.pool_in_use - weights - kv : 0;
  const std::uint64_t free = std::min(info.total, info.free + info.pool_cached);
  const std::uint64_t used = info.total - free;  // = used_before + activations + kv
  p.used_before = used > p.activations + kv ? used - p.activations - kv : 0;
  return p;
}

std::uint64_t activation_bytes_estimate(const ModelConfig& m, int rows, int logit_rows) {
  const std::uint64_t r = static_cast<std::uint64_t>(std::max(rows, 1));
  const std::uint64_t d = static_cast<std::uint64_t>(m.dim), h = static_cast<std::uint64_t>(m.hidden_dim);
  const std::uint64_t kv = m.n_heads > 0 ? static_cast<std::uint64_t>(m.kv_dim()) : 0;
  const std::uint64_t floats = r * (5 * d + 2 * kv + 2 * h) +
                               static_cast<std::uint64_t>(std::max(logit_rows, 1)) *
                                   static_cast<std::uint64_t>(m.vocab_size);
  return floats * 4 + r * std::max(d, h) * 2 + (64ull << 20);
}

std::vector<std::pair<std::string, double>> gpu_memory_metrics(const GpuMemoryPlan& p) {
  auto mb = [](std::uint64_t b) { return static_cast<double>(b) / (1024.0 * 1024.0); };
  return {{"gpu_total_mb", mb(p.total)},
          {"gpu_weights_mb", mb(p.weights)},
          {"gpu_kv_mb", mb(p.kv)},
          {"gpu_activations_mb", mb(p.activations)},
          {"gpu_free_mb", mb(p.free_after())}};
}

}  // namespace inferlab
