// The CUDA device itself: the clear error without a GPU, memory (zeroed, copies of every size
// through the staging ring, caching-pool reuse), event timing by category, and the fp32 linear
// on cuBLAS against the float64 reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "cuda_fixtures.h"
#include "inferlab/error.h"
#include "inferlab/kv/kv_storage.h"
#include "inferlab/support/rng.h"
#include "kernels/ref/ops.h"
#include "model_fixtures.h"

namespace inferlab {
namespace {

using testing::download;
using testing::upload;

TEST(CudaDevice, WithoutAGpuMakeDeviceSaysWhy) {
  std::string reason;
  if (cuda_device_visible(reason)) GTEST_SKIP() << "a CUDA device is visible here: nothing to refuse";
  try {
    make_device(DeviceKind::kCuda, 0);
    FAIL() << "expected an error";
  } catch (const Error& e) {
#if INFERLAB_HAVE_CUDA
    EXPECT_NE(std::string(e.what()).find("device kind cuda: no CUDA device visible (cudaGetDeviceCount"),
              std::string::npos)
        << e.what();
#else
    EXPECT_NE(std::string(e.what()).find("this build has no CUDA"), std::string::npos) << e.what();
#endif
  }
}

TEST(CudaDevice, DescribesTheGpuAndCopiesEverySize) {
  INFERLAB_REQUIRE_CUDA();
  auto dev = make_device(DeviceKind::kCuda, 0);
  EXPECT_EQ(dev->kind(), DeviceKind::kCuda);
  EXPECT_FALSE(dev->describe().empty());
  // Sizes below, at and above the staging ring's chunk (4 MiB), not multiples of anything.
  for (std::size_t bytes : {std::size_t{1}, std::size_t{4099}, std::size_t{(4u << 20) + 7}, std::size_t{(19u << 20) + 3}}) {
    std::vector<unsigned char> host(bytes);
    for (std::size_t i = 0; i < bytes; ++i) host[i] = static_cast<unsigned char>((i * 131 + 7) % 251);
    Buffer a(*dev, bytes);
    const auto zeros = download<unsigned char>(*dev, a, bytes);
    ASSERT_TRUE(std::all_of(zeros.begin(), zeros.end(), [](unsigned char c) { return c == 0; })) << bytes;
    dev->copy_to_device(a.data(), host.data(), bytes);
    Buffer b(*dev, bytes);
    dev->copy_on_device(b.data(), a.data(), bytes);
    EXPECT_EQ(download<unsigned char>(*dev, b, bytes), host) << bytes;
  }
}

#if INFERLAB_HAVE_CUDA  // the CudaDevice class exists only in a CUDA build
TEST(CudaDevice, PoolReusesFreedBlocksWithoutCudaMalloc) {
  INFERLAB_REQUIRE_CUDA();
  CudaDevice dev(0);
  void* first = nullptr;
  {
    Buffer a(dev, 1 << 20);
    first = a.data();
  }
  const std::uint64_t raw = dev.raw_allocations(), reused = dev.pool_reuses();
  for (int step = 0; step < 10; ++step) {  // a steady loop: same sizes every step
    Buffer a(dev, 1 << 20);
    EXPECT_EQ(a.data(), first);
  }
  EXPECT_EQ(dev.raw_allocations(), raw);
  EXPECT_EQ(dev.pool_reuses(), reused + 10);
  // A reused block is zeroed again.
  {
    Buffer a(dev, 1 << 20);
    std::vector<float> ones(1 << 18, 1.0f);
    dev.copy_to_device(a.data(), ones.data(), 1 << 20);
  }
  Buffer again(dev, 1 << 20);
  const auto back = download<float>(dev, again, 1 << 18);
  EXPECT_TRUE(std::all_of(back.begin(), back.end(), [](float f) { return f == 0.0f; }));
}

TEST(CudaDevice, EventTimingIsExclusiveByCategory) {
  INFERLAB_REQUIRE_CUDA();
  CudaDevice dev(0);
  dev.reset_op_times();
  const std::size_t n = 64u << 20;  // 256 MiB of floats: each add takes a measurable time
  Buffer x(dev, n * 4), y(dev, n * 4);
  {
    OpScope outer(dev, TimeCategory::kSampling);
    {
      OpScope inner(dev, TimeCategory::kNormRopeAct);
      for (int i = 0; i < 4; ++i) dev.add(x.as<float>(), y.as<float>(), n);
    }
  }
  const OpTimes& t = dev.op_times();
  EXPECT_EQ(t.ops, 2);
  EXPECT_GT(t[TimeCategory::kNormRopeAct], 1e-4);  // 4 x 768 MiB of traffic
  // The outer op ran nothing of its own: its exclusive time is the gap around the inner one.
  EXPECT_LT(t[TimeCategory::kSampling], t[TimeCategory::kNormRopeAct]);
  EXPECT_EQ(t[TimeCategory::kLinear], 0.0);
  dev.reset_op_times();
  EXPECT_EQ(dev.op_times().ops, 0);
  EXPECT_GT(dev.timer_overhead_s(), 0.0);
}

#endif  // INFERLAB_HAVE_CUDA

TEST(CudaDevice, Fp32LinearOnCublasMatchesReference) {
  INFERLAB_REQUIRE_CUDA();
  auto dev = make_device(DeviceKind::kCuda, 0);
  for (auto [n, out, in] : {std::tuple{1, 3, 129}, std::tuple{3, 37, 67}, std::tuple{129, 576, 576}}) {
    Rng rng(static_cast<std::uint64_t>(n + out));
    std::vector<float> x(static_cast<std::size_t>(n) * in), w(static_cast<std::size_t>(out) * in);
    for (float& v : x) v = static_cast<float>(rng.normal());
    for (float& v : w) v = static_cast<float>(0.1 * rng.normal());
    std::vector<float> want(static_cast<std::size_t>(n) * out);
    ref::matmul(x.data(), w.data(), want.data(), n, out, in);
    auto linear = testing::none_quantization(*dev)->make_linear("layers.0.wq", w, out, in);
    Buffer dx = upload(*dev, x), dy = testing::nan_buffer(*dev, want.size());
    linear->forward(dx.as<float>(), dy.as<float>(), n, *dev);
    const auto got = download<float>(*dev, dy, want.size());
    for (std::size_t i = 0; i < want.size(); ++i) {
      double mag = 0;  // the row's Σ|x w|: the scale fp32 rounding errors are relative to
      const std::size_t r = i / out, c = i % out;
      for (int k = 0; k < in; ++k) mag += std::fabs(static_cast<double>(x[r * in + k]) * w[c * in + k]);
      ASSERT_LE(std::fabs(static_cast<double>(got[i]) - want[i]), 1e-5 * mag + 1e-7) << i;
    }
    CpuDevice cpu(1);
    EXPECT_THROW(linear->forward(x.data(), want.data(), n, cpu), Error);  // built for the GPU
  }
}

TEST(CudaDevice, KvStorageInt8WritesOnTheGpu) {
  INFERLAB_REQUIRE_CUDA();
  auto dev = make_device(DeviceKind::kCuda, 0);
  ModelConfig c;
  c.name = "t";
  c.dim = 64;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.n_layers = 2;
  KvFormat format(KvDtype::kInt8);
  format.group_size = 0;  // one scale per token-head: the layout kv_write_int8 writes
  KvStorage kv(*dev, c, 8, 4, format);
  const int rows = 3, kvd = c.kv_dim(), hd = c.head_dim();
  std::vector<float> k(static_cast<std::size_t>(rows) * kvd), v(k.size());
  Rng rng(5);
  for (float& x : k) x = static_cast<float>(rng.normal());
  for (float& x : v) x = static_cast<float>(rng.normal());
  const std::vector<int> slots = {31, 0, 17};
  Buffer dk = upload(*dev, k), dv = upload(*dev, v), ds = upload(*dev, slots);
  kv.write(1, dk.as<float>(), dv.as<float>(), ds.as<int>(), rows);
  const KvLayerView view = kv.layer(1);
  std::vector<signed char> codes(static_cast<std::size_t>(kv.slots()) * kvd);
  std::vector<float> scale(static_cast<std::size_t>(kv.slots()) * c.n_kv_heads);
  dev->copy_to_host(codes.data(), view.v, codes.size());
  dev->copy_to_host(scale.data(), view.v_params, scale.size() * 4);
  std::vector<signed char> want(codes.size(), 0);
  std::vector<float> want_scale(scale.size(), 0.0f);
  ref::kv_write_int8(want.data(), want_scale.data(), v.data(), slots.data(), rows, c.n_kv_heads, hd);
  EXPECT_EQ(codes, want);
  EXPECT_EQ(scale, want_scale);
}

// f16 / bf16 pools on the GPU, with the first layer kept in f32: each layer is written in its own
// dtype (kv_write_half: the host rounding bit for bit; kv_write_f32), views say which, and a
// copy on write moves the 2-byte codes.
TEST(CudaDevice, KvStorageHalfWritesOnTheGpuBesideAnF32Layer) {
  INFERLAB_REQUIRE_CUDA();
  auto dev = make_device(DeviceKind::kCuda, 0);
  ModelConfig c;
  c.name = "t";
  c.dim = 64;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.n_layers = 2;
  for (KvDtype dtype : {KvDtype::kF16, KvDtype::kBf16}) {
    SCOPED_TRACE(kv_dtype_name(dtype));
    KvFormat format(dtype);
    format.f32_first_layers = 1;
    KvStorage kv(*dev, c, 8, 4, format);
    EXPECT_EQ(kv.bytes(), 32u * 32 * (2 * 4 + 2 * 2));  // slots x kv_dim x (f32 layer + half layer)
    const int rows = 3, kvd = c.kv_dim();
    std::vector<float> k(static_cast<std::size_t>(rows) * kvd), v(k.size());
    Rng rng(6);
    for (float& x : k) x = static_cast<float>(rng.normal());
    for (float& x : v) x = static_cast<float>(rng.normal());
    const std::vector<int> slots = {31, 0, 17};
    Buffer dk = upload(*dev, k), dv = upload(*dev, v), ds = upload(*dev, slots);
    for (int l = 0; l < 2; ++l) kv.write(l, dk.as<float>(), dv.as<float>(), ds.as<int>(), rows);
    EXPECT_EQ(kv.layer(0).k_dtype, KvDtype::kF32);
    const KvLayerView view = kv.layer(1);
    EXPECT_EQ(view.k_dtype, dtype);
    EXPECT_EQ(view.v_dtype, dtype);
    EXPECT_EQ(view.k_params, nullptr);
    std::vector<std::uint16_t> codes(static_cast<std::size_t>(kv.slots()) * kvd);
    dev->copy_to_host(codes.data(), view.k, codes.size() * 2);
    std::vector<std::uint16_t> want(static_cast<std::size_t>(kvd));
    for (int r = 0; r < rows; ++r) {
      kv_quantize_row(dtype, kvd, k.data() + static_cast<std::size_t>(r) * kvd, kvd, want.data(), nullptr);
      EXPECT_TRUE(std::equal(want.begin(), want.end(), codes.begin() + static_cast<std::ptrdiff_t>(slots[r]) * kvd)) << r;
    }
    std::vector<float> f32(static_cast<std::size_t>(kvd));
    dev->copy_to_host(f32.data(), kv.layer(0).v_at(17, 0), f32.size() * 4);
    EXPECT_TRUE(std::equal(f32.begin(), f32.end(), v.begin() + 2 * kvd));  // row 2 went to slot 17
    const BlockCopy copy{0, 5};  // slot 0 (row 1) -> slot 20
    kv.copy_blocks({&copy, 1});
    dev->copy_to_host(codes.data(), view.k, codes.size() * 2);
    EXPECT_TRUE(std::equal(codes.begin(), codes.begin() + kvd, codes.begin() + 20 * kvd));
    KvDtype got = KvDtype::kF32;
    void *hk = nullptr, *hv = nullptr;
    EXPECT_TRUE(kv.half_layer(1, got, hk, hv));
    EXPECT_EQ(got, dtype);
    EXPECT_FALSE(kv.half_layer(0, got, hk, hv));  // the f32 layer
  }
}

}  // namespace
}  // namespace inferlab
