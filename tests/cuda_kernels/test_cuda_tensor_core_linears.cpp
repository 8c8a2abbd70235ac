// The tensor-core and 128-bit GEMV kernels of the quantized linears (kernels/cuda/int4_mma.cu,
// int8_mma.cu: W4A16, W8A16, W8A8, W4A8) and the cuBLASLt GEMMs (gemm_lt.cu), each launched
// directly on a CudaDevice and compared with kernels/ref (double accumulation) on awkward shapes:
// rows across the GEMV / tile boundaries (1, 3, 8 | 9, 17, 64, 65, 130), `in` and `out` not
// multiples of the 64-wide tiles, ragged last groups. Outputs start NaN. Tolerances (max |got -
// want| / max |want|): 1e-5 where the kernel's only rounding is fp32 accumulation (GEMVs,
// int8-activation tiles whose int32 block sums are exact, the half GEMMs on operands already
// rounded to the half type), 1e-4 for the W4A16 / W8A16 tiles (activations split into two bf16
// halves: 16 significant bits). Skipped, saying why, without a CUDA device. The host logic
// (kernel choice, fragment layouts, packing) is tested on the CPU in
// tests/kernels/test_cuda_linear_plan.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "attention_fixtures.h"
#include "cuda_test_support.h"
#include "inferlab/device/cuda_device.h"
#include "inferlab/error.h"
#include "inferlab/support/rng.h"
#include "kernels/ref/half.h"
#include "kernels/ref/matmul_int4.h"
#include "kernels/ref/matmul_int8.h"
#include "test_support.h"

#if INFERLAB_HAVE_CUDA
#include "kernels/cuda/gemm_lt.h"
#include "kernels/cuda/linear_plan.h"
#include "kernels/cuda/tensor_core_linear.h"
#endif

namespace inferlab::testing {
namespace {

#if INFERLAB_HAVE_CUDA

std::vector<float> random_values(std::size_t n, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(rng.uniform() * 2.0 - 1.0);
  return v;
}

double max_relative_error(const std::vector<float>& got, const std::vector<float>& want) {
  double err = 0, scale = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    err = std::max(err, std::fabs(static_cast<double>(got[i]) - want[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(want[i])));
  }
  return scale > 0 ? err / scale : err;
}

struct Int4Case {
  int out, in, group_size;
  bool symmetric;
};
// gemv128 needs in % 32 == 0; the tiles take any in (67: a ragged last group and word).
constexpr Int4Case kInt4Cases[] = {{64, 256, 32, false}, {130, 512, 128, true}, {37, 96, 32, false},
                                   {5, 1024, 64, false}, {37, 67, 32, false}};
constexpr int kDecodeRows[] = {1, 3, 8};
constexpr int kPrefillRows[] = {9, 17, 64, 65, 130};

struct Int4Host {
  std::vector<std::uint8_t> packed, zero;
  std::vector<float> scale;
};

Int4Host quantize_int4(const Int4Case& c, std::uint64_t seed) {
  const std::vector<float> w = random_values(static_cast<std::size_t>(c.out) * c.in, seed);
  Int4Host h;
  h.packed.resize(static_cast<std::size_t>(c.out) * ref::int4_row_bytes(c.in));
  h.scale.resize(static_cast<std::size_t>(c.out) * ref::int4_groups(c.in, c.group_size));
  h.zero.resize(h.scale.size());
  ref::quantize_int4_groups(w.data(), c.out, c.in, c.group_size, h.packed.data(), h.scale.data(),
                            c.symmetric ? nullptr : h.zero.data());
  return h;
}

class CudaTensorCoreLinears : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string reason;
    if (!cuda_device_visible(reason)) GTEST_SKIP() << "no CUDA device visible: " << reason;
    device_ = make_device(DeviceKind::kCuda, 1);
    stream_ = cuda_device(*device_, "test").stream();
  }
  std::unique_ptr<Device> device_;
  CUstream_st* stream_ = nullptr;
};

TEST_F(CudaTensorCoreLinears, Int4WeightOnlyGemv128AndBf16TilesMatchTheReference) {
  std::uint64_t seed = 4100;
  for (const Int4Case& c : kInt4Cases) {
    const Int4Host h = quantize_int4(c, ++seed);
    Buffer dp = to_device(*device_, h.packed), ds = to_device(*device_, h.scale), dz = to_device(*device_, h.zero);
    const cuda::Int4Weights w{dp.as<std::uint8_t>(), ds.as<float>(), c.symmetric ? nullptr : dz.as<std::uint8_t>(),
                              c.group_size};
    std::vector<int> rows(std::begin(kPrefillRows), std::end(kPrefillRows));
    if (c.in % 32 == 0) rows.insert(rows.begin(), std::begin(kDecodeRows), std::end(kDecodeRows));
    for (int n : rows) {
      SCOPED_TRACE("out " + std::to_string(c.out) + ", in " + std::to_string(c.in) + ", group " +
                   std::to_string(c.group_size) + ", rows " + std::to_string(n));
      const std::vector<float> x = random_values(static_cast<std::size_t>(n) * c.in, ++seed);
      std::vector<float> want(static_cast<std::size_t>(n) * c.out);
      ref::matmul_int4(x.data(), h.packed.data(), h.scale.data(), c.symmetric ? nullptr : h.zero.data(), want.data(),
                       n, c.out, c.in, c.group_size);
      Buffer dx = to_device(*device_, x), dy = to_device(*device_, nan_filled(want.size()));
      const bool decode = n <= cuda::kDecodeMaxRows;
      if (decode)
        cuda::int4_linear_gemv128(dx.as<const float>(), w, dy.as<float>(), n, c.out, c.in, stream_);
      else
        cuda::int4_linear_mma(dx.as<const float>(), w, dy.as<float>(), n, c.out, c.in, stream_);
      const std::vector<float> got = to_host<float>(*device_, dy, want.size());
      EXPECT_EQ(count_non_finite(got), 0u);
      EXPECT_LT(max_relative_error(got, want), decode ? 1e-5 : 1e-4);
    }
  }
}

// int8 per channel with fp32 activations (W8A16): the 128-bit GEMV and the same bf16 tiles.
TEST_F(CudaTensorCoreLinears, Int8WeightOnlyGemv128AndBf16TilesMatchTheReference) {
  std::uint64_t seed = 4150;
  for (const Int4Case& c : kInt4Cases) {
    const std::vector<float> wf = random_values(static_cast<std::size_t>(c.out) * c.in, ++seed);
    std::vector<std::int8_t> q(wf.size());
    std::vector<float> qs(static_cast<std::size_t>(c.out));
    ref::quantize_int8_rows(wf.data(), c.out, c.in, q.data(), qs.data());
    Buffer dq = to_device(*device_, q), dqs = to_device(*device_, qs);
    std::vector<int> rows(std::begin(kPrefillRows), std::end(kPrefillRows));
    if (c.in % 16 == 0) rows.insert(rows.begin(), std::begin(kDecodeRows), std::end(kDecodeRows));
    for (int n : rows) {
      SCOPED_TRACE("out " + std::to_string(c.out) + ", in " + std::to_string(c.in) + ", rows " + std::to_string(n));
      const std::vector<float> x = random_values(static_cast<std::size_t>(n) * c.in, ++seed);
      std::vector<float> want(static_cast<std::size_t>(n) * c.out);
      ref::matmul_int8(x.data(), q.data(), qs.data(), want.data(), n, c.out, c.in);
      Buffer dx = to_device(*device_, x), dy = to_device(*device_, nan_filled(want.size()));
      const cuda::Int8Weights w8{dq.as<std::int8_t>(), dqs.as<float>()};
      const bool decode = n <= cuda::kDecodeMaxRows;
      if (decode)
        cuda::int8_linear_gemv128(dx.as<const float>(), w8, dy.as<float>(), n, c.out, c.in, stream_);
      else
        cuda::int8_linear_mma(dx.as<const float>(), w8, dy.as<float>(), n, c.out, c.in, stream_);
      const std::vector<float> got = to_host<float>(*device_, dy, want.size());
      EXPECT_EQ(count_non_finite(got), 0u);
      EXPECT_LT(max_relative_error(got, want), decode ? 1e-5 : 1e-4);
    }
  }
}

// Activations quantised by kernels/ref (per 32-block), fed to both kernels and to the reference.
TEST_F(CudaTensorCoreLinears, Int8ActivationTilesAndGemv128MatchTheReferenceForInt8AndInt4Weights) {
  std::uint64_t seed = 4200;
  for (const Int4Case& c : kInt4Cases) {
    const std::vector<float> wf = random_values(static_cast<std::size_t>(c.out) * c.in, ++seed);
    std::vector<std::int8_t> q(wf.size());
    std::vector<float> qs(static_cast<std::size_t>(c.out));
    ref::quantize_int8_rows(wf.data(), c.out, c.in, q.data(), qs.data());
    const Int4Host h = quantize_int4(c, ++seed);
    Buffer dq = to_device(*device_, q), dqs = to_device(*device_, qs);
    Buffer dp = to_device(*device_, h.packed), ds = to_device(*device_, h.scale), dz = to_device(*device_, h.zero);
    const cuda::Int8Weights w8{dq.as<std::int8_t>(), dqs.as<float>()};
    const cuda::Int4Weights w4{dp.as<std::uint8_t>(), ds.as<float>(), c.symmetric ? nullptr : dz.as<std::uint8_t>(),
                               c.group_size};
    std::vector<int> rows(std::begin(kPrefillRows), std::end(kPrefillRows));
    if (c.in % 32 == 0) rows.insert(rows.begin(), std::begin(kDecodeRows), std::end(kDecodeRows));
    for (int n : rows) {
      SCOPED_TRACE("out " + std::to_string(c.out) + ", in " + std::to_string(c.in) + ", rows " + std::to_string(n));
      const std::vector<float> x = random_values(static_cast<std::size_t>(n) * c.in, ++seed);
      std::vector<std::int8_t> xq(x.size());
      std::vector<float> xs(static_cast<std::size_t>(n) * ref::act_blocks(c.in));
      ref::quantize_act_rows(x.data(), n, c.in, xq.data(), xs.data());
      std::vector<float> want8(static_cast<std::size_t>(n) * c.out), want4(want8.size());
      ref::matmul_int8_act(xq.data(), xs.data(), q.data(), qs.data(), want8.data(), n, c.out, c.in);
      ref::matmul_int4_act(xq.data(), xs.data(), h.packed.data(), h.scale.data(), c.symmetric ? nullptr : h.zero.data(),
                           want4.data(), n, c.out, c.in, c.group_size);
      Buffer dxq = to_device(*device_, xq), dxs = to_device(*device_, xs);
      Buffer dy8 = to_device(*device_, nan_filled(want8.size())), dy4 = to_device(*device_, nan_filled(want8.size()));
      if (n <= cuda::kDecodeMaxRows) {
        cuda::int8_act_linear_gemv128(dxq.as<std::int8_t>(), dxs.as<float>(), ref::kActBlock, w8, dy8.as<float>(), n,
                                      c.out, c.in, stream_);
        cuda::int4_act_linear_gemv128(dxq.as<std::int8_t>(), dxs.as<float>(), w4, dy4.as<float>(), n, c.out, c.in,
                                      stream_);
      } else {
        cuda::int8_act_linear_mma(dxq.as<std::int8_t>(), dxs.as<float>(), ref::kActBlock, w8, dy8.as<float>(), n,
                                  c.out, c.in, stream_);
        cuda::int4_act_linear_mma(dxq.as<std::int8_t>(), dxs.as<float>(), w4, dy4.as<float>(), n, c.out, c.in,
                                  stream_);
      }
      const std::vector<float> got8 = to_host<float>(*device_, dy8, want8.size());
      const std::vector<float> got4 = to_host<float>(*device_, dy4, want4.size());
      EXPECT_EQ(count_non_finite(got8) + count_non_finite(got4), 0u);
      EXPECT_LT(max_relative_error(got8, want8), 1e-5);
      EXPECT_LT(max_relative_error(got4, want4), 1e-5);
    }
  }
}

// SmoothQuant's per-token scales (one block per row): the s8 tiles, the GEMV and cuBLASLt int8 ->
// int32 + the scale epilogue all give y = xs[r] * qs[o] * (exact integer dot).
TEST_F(CudaTensorCoreLinears, PerTokenInt8ThroughTilesGemvAndCublasLtMatchTheIntegerDot) {
  cuda::GemmLt lt;
  std::uint64_t seed = 4300;
  for (const Int4Case& c : kInt4Cases) {
    const std::vector<float> wf = random_values(static_cast<std::size_t>(c.out) * c.in, ++seed);
    std::vector<std::int8_t> q(wf.size());
    std::vector<float> qs(static_cast<std::size_t>(c.out));
    ref::quantize_int8_rows(wf.data(), c.out, c.in, q.data(), qs.data());
    Buffer dq = to_device(*device_, q), dqs = to_device(*device_, qs);
    const cuda::Int8Weights w8{dq.as<std::int8_t>(), dqs.as<float>()};
    for (int n : {1, 8, 9, 65}) {
      SCOPED_TRACE("out " + std::to_string(c.out) + ", in " + std::to_string(c.in) + ", rows " + std::to_string(n));
      Rng rng(++seed);
      std::vector<std::int8_t> xq(static_cast<std::size_t>(n) * c.in);
      for (auto& v : xq) v = static_cast<std::int8_t>(static_cast<int>(rng.uniform() * 255.0) - 127);
      const std::vector<float> xs = random_values(static_cast<std::size_t>(n), ++seed);
      std::vector<float> want(static_cast<std::size_t>(n) * c.out);
      std::vector<std::int32_t> want_acc(want.size());
      for (int r = 0; r < n; ++r)
        for (int o = 0; o < c.out; ++o) {
          std::int64_t dot = 0;
          for (int i = 0; i < c.in; ++i)
            dot += static_cast<std::int64_t>(xq[static_cast<std::size_t>(r) * c.in + i]) *
                   q[static_cast<std::size_t>(o) * c.in + i];
          want_acc[static_cast<std::size_t>(r) * c.out + o] = static_cast<std::int32_t>(dot);
          want[static_cast<std::size_t>(r) * c.out + o] = static_cast<float>(static_cast<double>(dot) * xs[r] * qs[o]);
        }
      Buffer dxq = to_device(*device_, xq), dxs = to_device(*device_, xs);
      Buffer dy = to_device(*device_, nan_filled(want.size()));
      const cuda::LinearKernel k = cuda::plan_int8_act_linear(n, c.out, c.in, c.in, false, true);
      if (k == cuda::LinearKernel::kGemv128)
        cuda::int8_act_linear_gemv128(dxq.as<std::int8_t>(), dxs.as<float>(), c.in, w8, dy.as<float>(), n, c.out, c.in,
                                      stream_);
      else if (k == cuda::LinearKernel::kGemv)
        cuda::int8_act_linear(dxq.as<std::int8_t>(), dxs.as<float>(), c.in, w8, dy.as<float>(), n, c.out, c.in,
                              stream_);
      else
        cuda::int8_act_linear_mma(dxq.as<std::int8_t>(), dxs.as<float>(), c.in, w8, dy.as<float>(), n, c.out, c.in,
                                  stream_);
      std::vector<float> got = to_host<float>(*device_, dy, want.size());
      EXPECT_EQ(count_non_finite(got), 0u);
      EXPECT_LT(max_relative_error(got, want), 1e-5) << cuda::linear_kernel_name(k);
      if (c.in % 4 == 0 && c.out % 4 == 0) {
        Buffer dacc(*device_, want_acc.size() * sizeof(std::int32_t));
        Buffer dy2 = to_device(*device_, nan_filled(want.size()));
        ASSERT_TRUE(lt.int8(dxq.as<std::int8_t>(), dq.as<std::int8_t>(), dacc.as<std::int32_t>(), n, c.out, c.in,
                            stream_));  // expected on sm_90 for in, out multiples of 4
        EXPECT_EQ(to_host<std::int32_t>(*device_, dacc, want_acc.size()), want_acc);
        cuda::scale_int32_output(dacc.as<std::int32_t>(), dxs.as<float>(), dqs.as<float>(), dy2.as<float>(), n, c.out,
                                 stream_);
        EXPECT_LT(max_relative_error(to_host<float>(*device_, dy2, want.size()), want), 1e-6);
      }
    }
  }
}

// bf16 / f16 through cuBLASLt, with and without the bias and residual (accumulate) epilogues,
// against a double product of the same half operands; a shape seen before reuses its plan.
TEST_F(CudaTensorCoreLinears, HalfGemmsThroughCublasLtWithEpilogues) {
  cuda::GemmLt lt;
  std::uint64_t seed = 4400;
  for (cuda::HalfType type : {cuda::HalfType::kBF16, cuda::HalfType::kF16}) {
    const auto round = [type](float v) {
      return type == cuda::HalfType::kF16 ? ref::float_to_f16(v) : ref::float_to_bf16(v);
    };
    const auto widen = [type](std::uint16_t h) {
      return type == cuda::HalfType::kF16 ? ref::f16_to_float(h) : ref::bf16_to_float(h);
    };
    for (auto [out, in] : {std::pair{64, 256}, std::pair{37, 96}, std::pair{130, 512}}) {
      std::vector<std::uint16_t> wh(static_cast<std::size_t>(out) * in);
      const std::vector<float> wf = random_values(wh.size(), ++seed);
      const std::vector<float> bias = random_values(static_cast<std::size_t>(out), ++seed);
      for (std::size_t i = 0; i < wh.size(); ++i) wh[i] = round(wf[i]);
      Buffer dw = to_device(*device_, wh), db = to_device(*device_, bias);
      for (int n : {1, 3, 17, 130}) {
        for (int epi = 0; epi < 3; ++epi) {  // 0 plain, 1 + bias, 2 accumulate into y
          SCOPED_TRACE("out " + std::to_string(out) + ", in " + std::to_string(in) + ", rows " + std::to_string(n) +
                       ", epilogue " + std::to_string(epi));
          const std::vector<float> xf = random_values(static_cast<std::size_t>(n) * in, ++seed);
          const std::vector<float> y0 = random_values(static_cast<std::size_t>(n) * out, ++seed);
          std::vector<std::uint16_t> xh(xf.size());
          for (std::size_t i = 0; i < xh.size(); ++i) xh[i] = round(xf[i]);
          std::vector<float> want(y0.size());
          for (int r = 0; r < n; ++r)
            for (int o = 0; o < out; ++o) {
              double acc = epi == 1 ? bias[o] : epi == 2 ? y0[static_cast<std::size_t>(r) * out + o] : 0.0;
              for (int i = 0; i < in; ++i)
                acc += static_cast<double>(widen(xh[static_cast<std::size_t>(r) * in + i])) *
                       widen(wh[static_cast<std::size_t>(o) * in + i]);
              want[static_cast<std::size_t>(r) * out + o] = static_cast<float>(acc);
            }
          Buffer dx = to_device(*device_, xh), dy = to_device(*device_, epi == 2 ? y0 : nan_filled(y0.size()));
          lt.half(dx.as<std::uint16_t>(), dw.as<std::uint16_t>(), dy.as<float>(), n, out, in, type,
                  epi == 1 ? db.as<float>() : nullptr, epi == 2, stream_);
          const std::vector<float> got = to_host<float>(*device_, dy, want.size());
          EXPECT_EQ(count_non_finite(got), 0u);
          EXPECT_LT(max_relative_error(got, want), 1e-5);
        }
      }
    }
  }
  const std::uint64_t misses = lt.plan_misses();
  std::vector<std::uint16_t> one(64 * 256, 0);
  Buffer dw = to_device(*device_, one), dx = to_device(*device_, one), dy(*device_, 64 * 64 * sizeof(float));
  lt.half(dx.as<std::uint16_t>(), dw.as<std::uint16_t>(), dy.as<float>(), 1, 64, 256, cuda::HalfType::kBF16, nullptr,
          false, stream_);
  device_->synchronize();
  EXPECT_EQ(lt.plan_misses(), misses);  // (n 1, 64 x 256, bf16, plain) was planned above
}

TEST_F(CudaTensorCoreLinears, LaunchersRefuseShapesTheirKernelsCannotTake) {
  const cuda::Int4Weights w{nullptr, nullptr, nullptr, 16};
  EXPECT_THROW(cuda::int4_linear_mma(nullptr, w, nullptr, 64, 64, 256, stream_), Error);
  EXPECT_THROW(cuda::int4_linear_gemv128(nullptr, cuda::Int4Weights{nullptr, nullptr, nullptr, 32}, nullptr,
                                         cuda::kDecodeMaxRows + 1, 64, 256, stream_),
               Error);
  EXPECT_THROW(cuda::int8_act_linear_mma(nullptr, nullptr, 16, cuda::Int8Weights{}, nullptr, 64, 64, 256, stream_),
               Error);
  cuda::GemmLt lt;
  EXPECT_THROW((void)lt.int8(nullptr, nullptr, nullptr, 4, 37, 256, stream_), Error);
}

#else

TEST(CudaTensorCoreLinears, NeedACudaBuild) { GTEST_SKIP() << "this build has no CUDA (INFERLAB_CUDA=OFF or no nvcc)"; }

#endif  // INFERLAB_HAVE_CUDA

}  // namespace
}  // namespace inferlab::testing
