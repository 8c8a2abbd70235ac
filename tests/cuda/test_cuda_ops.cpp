// Every elementwise op of the CUDA device against kernels/ref (float64 comparisons), over
// awkward shapes (1, 3, 129 rows; widths that are not multiples of a warp or a block), outputs
// poisoned with NaN. Skipped with the reason when no CUDA device is visible.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "cuda_fixtures.h"
#include "inferlab/support/rng.h"
#include "kernels/ref/ops.h"

namespace inferlab {
namespace {

using testing::download;
using testing::nan_buffer;
using testing::upload;

std::vector<float> normal(std::size_t n, std::uint64_t seed, double scale = 1.0) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(scale * rng.normal());
  return v;
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want, double rel, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i) {
    ASSERT_FALSE(std::isnan(got[i])) << what << " [" << i << "] not written";
    EXPECT_LE(std::fabs(static_cast<double>(got[i]) - want[i]), rel * (1.0 + std::fabs(static_cast<double>(want[i]))))
        << what << " [" << i << "]";
  }
}

constexpr int kRows[] = {1, 3, 129};

TEST(CudaOps, Embedding) {
  INFERLAB_REQUIRE_CUDA();
  auto dev = make_device(DeviceKind::kCuda, 0);
  for (int rows : kRows)
    for (int dim : {1, 33, 576}) {
      const int vocab = 50;
      const auto table = normal(static_cast<std::size_t>(vocab) * dim, 1);
      std::vector<int> tokens(rows);
      for (int r = 0; r < rows; ++r) tokens[r] = (r * 7 + 3) % vocab;
      std::vector<float> want(static_cast<std::size_t>(rows) * dim);
      ref::embedding(table.data(), tokens.data(), rows, dim, want.data());
      Buffer dt = upload(*dev, table), dtok = upload(*dev, tokens), out = nan_buffer(*dev, want.size());
      compute_device(*dev, "cuda ops test").embedding(dt.as<float>(), dtok.as<int>(), rows, dim, out.as<float>());
      expect_close(download<float>(*dev, out, want.size()), want, 0, "embedding");
    }
}

TEST(CudaOps, RmsNorm) {
  INFERLAB_REQUIRE_CUDA();
  auto dev = make_device(DeviceKind::kCuda, 0);
  for (int rows : kRows)
    for (int dim : {1, 3, 129, 576, 2049}) {
      const auto x = normal(static_cast<std::size_t>(rows) * dim, 2, 3.0), w = normal(dim, 3);
      std::vector<float> want(x.size());
      for (int r = 0; r < rows; ++r)
        ref::rmsnorm(want.data() + static_cast<std::size_t>(r) * dim, x.data() + static_cast<std::size_t>(r) * dim,
                     w.data(), dim, 1e-5f);
      Buffer dx = upload(*dev, x), dw = upload(*dev, w), out = nan_buffer(*dev, x.size());
      compute_device(*dev, "cuda ops test").rmsnorm(dx.as<float>(), dw.as<float>(), out.as<float>(), rows, dim, 1e-5f);
      expect_close(download<float>(*dev, out, x.size()), want, 1e-6, "rmsnorm");
    }
}

TEST(CudaOps, RopeBothStyles) {
  INFERLAB_REQUIRE_CUDA();
  auto dev = make_device(DeviceKind::kCuda, 0);
  for (RopeStyle style : {RopeStyle::kInterleaved, RopeStyle::kHalf})
    for (int rows : kRows) {
      const int n_heads = 3, n_kv = 1, hd = 64;
      const float theta = 10000.0f;
      std::vector<float> inv(hd / 2);
      for (int j = 0; j < hd / 2; ++j) inv[j] = 1.0f / std::pow(theta, static_cast<float>(2 * j) / hd);
      auto q = normal(static_cast<std::size_t>(rows) * n_heads * hd, 4), k = normal(static_cast<std::size_t>(rows) * n_kv * hd, 5);
      std::vector<int> pos(rows);
      for (int r = 0; r < rows; ++r) pos[r] = r * 37 % 1000;
      std::vector<float> wq = q, wk = k;
      for (int r = 0; r < rows; ++r) {
        ref::rope(wq.data() + static_cast<std::size_t>(r) * n_heads * hd, n_heads, hd, pos[r], theta, style);
        ref::rope(wk.data() + static_cast<std::size_t>(r) * n_kv * hd, n_kv, hd, pos[r], theta, style);
      }
      Buffer dq = upload(*dev, q), dk = upload(*dev, k), dp = upload(*dev, pos), di = upload(*dev, inv);
      compute_device(*dev, "cuda ops test").rope(dq.as<float>(), dk.as<float>(), dp.as<int>(), rows, n_heads, n_kv, hd, di.as<float>(), style);
      // The angle pos * inv_freq is rounded to fp32 (as on the CPU): ~1e-4 at positions near 1000.
      expect_close(download<float>(*dev, dq, q.size()), wq, 2e-4, "rope q");
      expect_close(download<float>(*dev, dk, k.size()), wk, 2e-4, "rope k");
    }
}

TEST(CudaOps, KvWriteF32AndInt8) {
  INFERLAB_REQUIRE_CUDA();
  auto dev = make_device(DeviceKind::kCuda, 0);
  for (int rows : kRows) {
    const int n_kv = 3, hd = 40, kvd = n_kv * hd, n_slots = 300;
    auto k = normal(static_cast<std::size_t>(rows) * kvd, 6), v = normal(static_cast<std::size_t>(rows) * kvd, 7);
    if (rows > 1) std::fill(k.begin() + hd, k.begin() + 2 * hd, 0.0f);  // an all-zero head: scale 0
    std::vector<int> slots(rows);
    for (int r = 0; r < rows; ++r) slots[r] = (r * 131 + 5) % n_slots;
    std::vector<float> kc(static_cast<std::size_t>(n_slots) * kvd, std::nanf("")), vc = kc;
    ref::kv_write(kc.data(), k.data(), slots.data(), rows, kvd);
    ref::kv_write(vc.data(), v.data(), slots.data(), rows, kvd);
    Buffer dk = upload(*dev, k), dv = upload(*dev, v), ds = upload(*dev, slots);
    Buffer dkc = nan_buffer(*dev, kc.size()), dvc = nan_buffer(*dev, vc.size());
    compute_device(*dev, "cuda ops test").kv_write_f32(dkc.as<float>(), dvc.as<float>(), dk.as<float>(), dv.as<float>(), ds.as<int>(), rows, kvd);
    auto gk = download<float>(*dev, dkc, kc.size()), gv = download<float>(*dev, dvc, vc.size());
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < kvd; ++c) {
        const std::size_t i = static_cast<std::size_t>(slots[r]) * kvd + c;
        ASSERT_EQ(gk[i], kc[i]);
        ASSERT_EQ(gv[i], vc[i]);
      }
    // int8: codes and scales exactly as the reference (same fp32 expressions, same rounding).
    std::vector<signed char> want_codes(static_cast<std::size_t>(n_slots) * kvd, 99);
    std::vector<float> want_scale(static_cast<std::size_t>(n_slots) * n_kv, -1.0f);
    ref::kv_write_int8(want_codes.data(), want_scale.data(), k.data(), slots.data(), rows, n_kv, hd);
    Buffer codes = upload(*dev, std::vector<signed char>(want_codes.size(), 99)),
           vcodes = upload(*dev, std::vector<signed char>(want_codes.size(), 99));
    Buffer scale = upload(*dev, std::vector<float>(want_scale.size(), -1.0f)),
           vscale = upload(*dev, std::vector<float>(want_scale.size(), -1.0f));
    compute_device(*dev, "cuda ops test").kv_write_int8(codes.as<std::int8_t>(), vcodes.as<std::int8_t>(), scale.as<float>(), vscale.as<float>(),
                       dk.as<float>(), dv.as<float>(), ds.as<int>(), rows, n_kv, hd);
    EXPECT_EQ(download<signed char>(*dev, codes, want_codes.size()), want_codes);
    EXPECT_EQ(download<float>(*dev, scale, want_scale.size()), want_scale);
    std::vector<signed char> want_v(want_codes.size(), 99);
    std::vector<float> want_vs(want_scale.size(), -1.0f);
    ref::kv_write_int8(want_v.data(), want_vs.data(), v.data(), slots.data(), rows, n_kv, hd);
    EXPECT_EQ(download<signed char>(*dev, vcodes, want_v.size()), want_v);
    EXPECT_EQ(download<float>(*dev, vscale, want_vs.size()), want_vs);
  }
}

// f16 / bf16 KV rows: every stored value bit for bit what the CPU device (kv_quantize_row's
// round to nearest even) stores, overflow to inf and f16 subnormals included; slots not
// written keep their old bits.
TEST(CudaOps, KvWriteHalfMatchesTheHostRoundingBitForBit) {
  INFERLAB_REQUIRE_CUDA();
  auto dev = make_device(DeviceKind::kCuda, 0);
  CpuDevice cpu(1);
  for (KvDtype dtype : {KvDtype::kF16, KvDtype::kBf16})
    for (int rows : kRows) {
      SCOPED_TRACE(std::string(kv_dtype_name(dtype)) + ", rows " + std::to_string(rows));
      const int kvd = 3 * 40, n_slots = 300;
      auto k = normal(static_cast<std::size_t>(rows) * kvd, 16, 3.0), v = normal(static_cast<std::size_t>(rows) * kvd, 17);
      k[0] = 1e5f;    // beyond f16: inf (bf16 keeps it)
      k[1] = -3e-7f;  // an f16 subnormal
      k[2] = 0.1f + 0x1p-14f;  // not representable in either: rounds
      std::vector<int> slots(rows);
      for (int r = 0; r < rows; ++r) slots[r] = (r * 131 + 5) % n_slots;
      const std::vector<std::uint16_t> old(static_cast<std::size_t>(n_slots) * kvd, 0xabcd);
      std::vector<std::uint16_t> want_k = old, want_v = old;
      cpu.kv_write_half(dtype, want_k.data(), want_v.data(), k.data(), v.data(), slots.data(), rows, kvd);
      Buffer dk = upload(*dev, k), dv = upload(*dev, v), ds = upload(*dev, slots);
      Buffer dkc = upload(*dev, old), dvc = upload(*dev, old);
      compute_device(*dev, "cuda ops test")
          .kv_write_half(dtype, dkc.data(), dvc.data(), dk.as<float>(), dv.as<float>(), ds.as<int>(), rows, kvd);
      EXPECT_EQ(download<std::uint16_t>(*dev, dkc, old.size()), want_k);
      EXPECT_EQ(download<std::uint16_t>(*dev, dvc, old.size()), want_v);
    }
  EXPECT_THROW(compute_device(*dev, "cuda ops test").kv_write_half(KvDtype::kInt8, nullptr, nullptr, nullptr, nullptr,
                                                                     nullptr, 1, 8),
               Error);
}

TEST(CudaOps, AddSwigluAddBias) {
  INFERLAB_REQUIRE_CUDA();
  auto dev = make_device(DeviceKind::kCuda, 0);
  for (int rows : kRows)
    for (int width : {1, 3, 129, 1536}) {
      const std::size_t n = static_cast<std::size_t>(rows) * width;
      const auto x = normal(n, 8), y = normal(n, 9, 4.0), b = normal(width, 10);
      std::vector<float> want_add = x, want_sw = x, want_bias = x;
      ref::add(want_add.data(), y.data(), static_cast<int>(n));
      ref::swiglu(want_sw.data(), y.data(), static_cast<int>(n));
      ref::add_bias(want_bias.data(), b.data(), rows, width);
      Buffer a = upload(*dev, x), s = upload(*dev, x), bb = upload(*dev, x), dy = upload(*dev, y), db = upload(*dev, b);
      compute_device(*dev, "cuda ops test").add(a.as<float>(), dy.as<float>(), n);
      compute_device(*dev, "cuda ops test").swiglu(s.as<float>(), dy.as<float>(), n);
      compute_device(*dev, "cuda ops test").add_bias(bb.as<float>(), db.as<float>(), rows, width);
      expect_close(download<float>(*dev, a, n), want_add, 0, "add");
      expect_close(download<float>(*dev, s, n), want_sw, 1e-6, "swiglu");
      expect_close(download<float>(*dev, bb, n), want_bias, 0, "add_bias");
    }
}

}  // namespace
}  // namespace inferlab
