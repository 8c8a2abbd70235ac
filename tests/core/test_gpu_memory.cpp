// kv.gpu_memory_fraction: the KV pool sizing arithmetic, the activation estimate, the measured
// breakdown, and the TOML key (on the host; the CUDA device only supplies total and free).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <string>

#include "inferlab/device/cuda_device.h"
#include "inferlab/device/device.h"
#include "inferlab/error.h"
#include "inferlab/experiment/experiment.h"
#include "inferlab/device/gpu_memory.h"

namespace inferlab {
namespace {

constexpr std::uint64_t kGiB = 1ull << 30, kMiB = 1ull << 20;

TEST(GpuMemory, FractionLeavesWhatWeightsAndActivationsDoNotUse) {
  // 140 GiB GPU, 139 GiB free after the weights (1 GiB in use), 2 GiB of activations, 1 MiB blocks.
  const GpuMemoryPlan p = plan_kv_from_memory_fraction(0.5, 140 * kGiB, 139 * kGiB, 900 * kMiB, 2 * kGiB, kMiB);
  EXPECT_EQ(p.used_before, 1 * kGiB);
  EXPECT_EQ(p.kv_blocks, static_cast<int>((70 * kGiB - 1 * kGiB - 2 * kGiB) / kMiB));
  EXPECT_EQ(p.kv, static_cast<std::uint64_t>(p.kv_blocks) * kMiB);
  EXPECT_EQ(p.free_after(), 140 * kGiB - 1 * kGiB - 2 * kGiB - p.kv);
  // A larger fraction gives a larger pool, by exactly the extra share.
  const GpuMemoryPlan q = plan_kv_from_memory_fraction(0.9, 140 * kGiB, 139 * kGiB, 900 * kMiB, 2 * kGiB, kMiB);
  EXPECT_EQ(q.kv - p.kv, static_cast<std::uint64_t>(std::floor(0.9 * 140 * kGiB)) -
                             static_cast<std::uint64_t>(std::floor(0.5 * 140 * kGiB)));
  // Blocks round down.
  EXPECT_EQ(plan_kv_from_memory_fraction(1.0, 10 * kMiB, 10 * kMiB, 0, 0, 3 * kMiB).kv_blocks, 3);
}

TEST(GpuMemory, TooSmallAFractionSaysWhatTookTheMemory) {
  try {
    plan_kv_from_memory_fraction(0.01, 100 * kGiB, 90 * kGiB, 9 * kGiB, kGiB, kMiB);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("leaves no room for the KV cache"), std::string::npos) << m;
    EXPECT_NE(m.find("10240 MiB is in use already (weights 9216 MiB)"), std::string::npos) << m;
  }
  EXPECT_THROW(plan_kv_from_memory_fraction(0.0, kGiB, kGiB, 0, 0, kMiB), Error);
  EXPECT_THROW(plan_kv_from_memory_fraction(1.5, kGiB, kGiB, 0, 0, kMiB), Error);
}

TEST(GpuMemory, ActivationEstimateCountsTheModelsScratch) {
  ModelConfig c{.dim = 576, .hidden_dim = 1536, .n_heads = 9, .n_kv_heads = 3, .vocab_size = 49152};
  const std::uint64_t one = activation_bytes_estimate(c, 1, 1), two = activation_bytes_estimate(c, 2, 1);
  // One more row: 5 dim + 2 kv_dim + 2 hidden floats, plus its half copy of max(dim, hidden).
  EXPECT_EQ(two - one, (5u * 576 + 2u * 192 + 2u * 1536) * 4 + 1536u * 2);
  EXPECT_EQ(activation_bytes_estimate(c, 1, 2) - one, 49152u * 4);
}

TEST(GpuMemory, MeasuredBreakdownAddsUpToTotal) {
  CudaMemoryInfo info;
  info.total = 100 * kGiB;
  info.free = 60 * kGiB;
  info.pool_in_use = 30 * kGiB;  // weights 10 + KV 15 + activations 5
  info.pool_cached = 2 * kGiB;
  const GpuMemoryPlan p = measured_gpu_memory(info, 10 * kGiB, 15 * kGiB);
  EXPECT_EQ(p.activations, 5 * kGiB);
  EXPECT_EQ(p.free_after(), 62 * kGiB);
  EXPECT_EQ(p.used_before + p.activations + p.kv + p.free_after(), p.total);
  EXPECT_EQ(gpu_memory_metrics(p).size(), 5u);
}

TEST(GpuMemory, FractionOffCudaIsRefused) {
  CpuDevice cpu(1);
  ModelConfig c{.dim = 64, .hidden_dim = 128, .n_heads = 4, .n_kv_heads = 2, .vocab_size = 32};
  try {
    plan_gpu_kv_pool(cpu, 0.9, c, 0, 16, 1, kMiB);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("this run's device is cpu (allowed: cuda"), std::string::npos) << e.what();
  }
}

ExperimentSpec load_text(const std::string& text) {
  const std::string path = ::testing::TempDir() + "gpu_memory_fraction.toml";
  std::ofstream(path) << text;
  return load_experiment(path, {});
}

TEST(GpuMemory, TomlKeyIsExclusiveWithNumBlocks) {
  // kind = "cuda": elsewhere the key does nothing and is refused (ExperimentKeys walks it).
  const std::string base = "[model]\npreset = \"stories260k\"\n[device]\nkind = \"cuda\"\n[baseline]\n";
  const ExperimentSpec s = load_text(base + "kv = { gpu_memory_fraction = 0.8 }\n");
  EXPECT_DOUBLE_EQ(s.variants.front().stack.kv.gpu_memory_fraction, 0.8);
  EXPECT_EQ(s.variants.front().stack.kv.num_blocks, 0);
  EXPECT_THROW(load_text(base + "kv = { gpu_memory_fraction = 1.2 }\n"), Error);
  try {
    load_text(base + "kv = { num_blocks = 4, gpu_memory_fraction = 0.5 }\n");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("gpu_memory_fraction.toml:6:"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("allowed: one of them"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace inferlab
