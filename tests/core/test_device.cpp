// The device seam: tensor views, owning buffers, the CPU device's memory and timing, and the
// errors a plugin or an experiment gets when it asks for a device this build does not have.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "inferlab/device/cuda_device.h"
#include "inferlab/device/device.h"
#include "inferlab/error.h"
#include "inferlab/kv/kv_cache.h"
#include "test_support.h"

namespace inferlab {
namespace {

TEST(Device, NamesRoundTrip) {
  for (DeviceKind k : {DeviceKind::kCpu, DeviceKind::kCuda, DeviceKind::kSim}) {
    DeviceKind back = DeviceKind::kSim;
    ASSERT_TRUE(parse_device_kind(device_kind_name(k), back));
    EXPECT_EQ(back, k);
  }
  DeviceKind k;
  EXPECT_FALSE(parse_device_kind("tpu", k));
  EXPECT_EQ(dtype_size(DType::kF32), 4u);
  EXPECT_EQ(dtype_size(DType::kBF16), 2u);
  EXPECT_EQ(dtype_size(DType::kI8), 1u);
  EXPECT_STREQ(time_category_name(TimeCategory::kNormRopeAct), "norm_rope_act");
}

TEST(Device, TensorViewShapesAndStrides) {
  float data[24];
  const TensorView t = TensorView::of(data, DType::kF32, DeviceKind::kCpu, {2, 3, 4});
  EXPECT_EQ(t.rank, 3);
  EXPECT_EQ(t.numel(), 24);
  EXPECT_EQ(t.bytes(), 96u);
  EXPECT_EQ(t.strides[0], 12);
  EXPECT_EQ(t.strides[1], 4);
  EXPECT_EQ(t.strides[2], 1);
  EXPECT_TRUE(t.contiguous());
  TensorView sliced = t;
  sliced.shape[2] = 2;  // every other column: strides unchanged, no longer contiguous
  EXPECT_FALSE(sliced.contiguous());
  EXPECT_THROW(TensorView::of(data, DType::kF32, DeviceKind::kCpu, {1, 1, 1, 1, 1}), Error);
}

TEST(Device, CpuBuffersAreZeroedAlignedAndCopy) {
  CpuDevice device(2);
  EXPECT_EQ(device.kind(), DeviceKind::kCpu);
  EXPECT_NE(device.describe().find("2 threads"), std::string::npos);
  Buffer a(device, 1000);
  ASSERT_NE(a.data(), nullptr);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(a.data()) % 64, 0u);
  for (std::size_t i = 0; i < 1000; ++i) ASSERT_EQ(a.as<unsigned char>()[i], 0);
  std::vector<float> host = {1, 2, 3, 4};
  device.copy_to_device(a.data(), host.data(), 16);
  Buffer b(device, 16);
  device.copy_on_device(b.data(), a.data(), 16);
  std::vector<float> back(4);
  device.copy_to_host(back.data(), b.data(), 16);
  EXPECT_EQ(back, host);
  Buffer moved = std::move(b);
  EXPECT_EQ(b.data(), nullptr);
  EXPECT_EQ(moved.bytes(), 16u);
}

TEST(Device, OpTimesAccumulatePerCategory) {
  CpuDevice device(1);
  EXPECT_GT(device.timer_overhead_s(), 0.0);
  EXPECT_LT(device.timer_overhead_s(), 1e-5);  // a clock read pair, not a syscall storm
  EXPECT_EQ(device.op_times().ops, 0);
  {
    OpScope t(device, TimeCategory::kAttention);
    volatile double x = 0;
    for (int i = 0; i < 100000; ++i) x = x + 1.0;
  }
  { OpScope t(device, TimeCategory::kLinear); }
  EXPECT_EQ(device.op_times().ops, 2);
  EXPECT_GT(device.op_times()[TimeCategory::kAttention], 0.0);
  EXPECT_EQ(device.op_times()[TimeCategory::kScheduler], 0.0);
  device.reset_op_times();
  EXPECT_EQ(device.op_times().ops, 0);
}

// `inferlab run` of a CUDA experiment where no GPU is visible: one clear error naming the file
// and the reason, a non-zero exit, and no results folder (not one failed cell per repeat).
TEST(Device, CudaRunWithoutAGpuIsOneErrorBeforeAnyOutput) {
  std::string reason;
  if (cuda_device_visible(reason)) GTEST_SKIP() << "a CUDA device is visible: the run would start";
  const std::string out = ::testing::TempDir() + "inferlab_cuda_run_refused";
  std::filesystem::remove_all(out);
  const testing::CliResult r = testing::run_inferlab("run " + testing::source_dir() +
                                                     "/experiments/quickstart.toml --set device.kind=cuda --out " + out);
  EXPECT_NE(r.code, 0);
#if INFERLAB_HAVE_CUDA
  EXPECT_NE(r.err.find("quickstart.toml: [device] kind = \"cuda\", but no CUDA device is visible ("), std::string::npos)
      << r.err;
#else  // refused at plan time, before any plugin is asked (no plugin lists cuda in this build)
  EXPECT_NE(r.err.find("quickstart.toml: [device] kind = \"cuda\", but this build has no CUDA ("), std::string::npos)
      << r.err;
#endif
  EXPECT_NE(r.err.find("allowed on this machine: cpu, sim"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(out)) << "a refused run wrote " << out;
}

TEST(Device, CudaWithoutAGpuOrWithoutCudaIsAClearError) {
  std::string reason;
  if (cuda_device_visible(reason)) GTEST_SKIP() << "a CUDA device is visible: make_device(cuda) succeeds here";
  try {
    make_device(DeviceKind::kCuda, 1);
    FAIL() << "expected an error";
  } catch (const Error& e) {
#if INFERLAB_HAVE_CUDA
    EXPECT_NE(std::string(e.what()).find("device kind cuda: no CUDA device visible ("), std::string::npos) << e.what();
#else
    EXPECT_NE(std::string(e.what()).find("this build has no CUDA"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("allowed here: cpu, sim"), std::string::npos) << e.what();
#endif
  }
}

TEST(KvStorage, F32AndInt8AreImplementedAndBytesFollowTheDtype) {
  CpuDevice device(1);
  ModelConfig c;
  c.name = "t";
  c.dim = 16;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.n_layers = 3;
  KvStorage kv(device, c, 5, 4);
  EXPECT_EQ(kv.bytes(), 2u * 3 * 5 * 4 * 8 * 4);  // k and v, layers, blocks, tokens, kv_dim, f32
  EXPECT_EQ(kv.layer(2).num_blocks, 5);
  // int8 with one group per token-head (group_size 0): a byte per value plus an fp32 scale per
  // (token, KV head).
  KvFormat int8(KvDtype::kInt8);
  int8.group_size = 0;
  EXPECT_EQ(KvStorage(device, c, 5, 4, int8).bytes(), 2u * 3 * 5 * 4 * (8 + 2 * 4));
  // int4 in groups of 4 (head_dim 4): half a byte per value plus (scale, min) per group.
  KvFormat int4(KvDtype::kInt4);
  int4.group_size = 4;
  EXPECT_EQ(KvStorage(device, c, 5, 4, int4).bytes(), 2u * 3 * 5 * 4 * 2 * (2 + 8));
  // f16 / bf16: two bytes per value, no scales.
  for (KvDtype half : {KvDtype::kF16, KvDtype::kBf16})
    EXPECT_EQ(KvStorage(device, c, 5, 4, half).bytes(), 2u * 3 * 5 * 4 * 8 * 2) << kv_dtype_name(half);
  EXPECT_EQ(kv_dtype_bits(KvDtype::kInt4), 4);
  // Copy on write copies every layer's K and V of a block.
  for (int l = 0; l < 3; ++l) {
    kv.k_slot(l, 4 * 1 + 2)[5] = 10.0f + static_cast<float>(l);
    kv.v_slot(l, 4 * 1 + 2)[5] = -10.0f - static_cast<float>(l);
  }
  const BlockCopy copy{1, 3};
  kv.copy_blocks({&copy, 1});
  for (int l = 0; l < 3; ++l) {
    EXPECT_EQ(kv.layer(l).k_at(4 * 3 + 2, 1)[1], 10.0f + static_cast<float>(l));
    EXPECT_EQ(kv.layer(l).v_at(4 * 3 + 2, 1)[1], -10.0f - static_cast<float>(l));
  }
  const BlockCopy bad{1, 5};
  EXPECT_THROW(kv.copy_blocks({&bad, 1}), Error);
}

}  // namespace
}  // namespace inferlab

namespace inferlab {
namespace {

// A draft model's ops run inside the decoder's sampling bracket: time is charged to the
// innermost op only, so the categories never count a second twice.
TEST(Device, NestedOpsAreChargedExclusively) {
  CpuDevice device(1);
  auto spin = [] {
    volatile double x = 0;
    for (int i = 0; i < 200000; ++i) x = x + 1.0;
  };
  const auto t0 = std::chrono::steady_clock::now();
  {
    OpScope outer(device, TimeCategory::kSampling);
    spin();
    {
      OpScope inner(device, TimeCategory::kLinear);
      spin();
    }
    spin();
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const OpTimes& t = device.op_times();
  EXPECT_EQ(t.ops, 2);
  EXPECT_GT(t[TimeCategory::kLinear], 0.0);
  EXPECT_GT(t[TimeCategory::kSampling], 0.0);
  EXPECT_LE(t[TimeCategory::kLinear] + t[TimeCategory::kSampling], wall);
}

}  // namespace
}  // namespace inferlab
