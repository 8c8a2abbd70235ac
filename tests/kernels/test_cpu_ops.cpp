// The CPU device's elementwise ops (kernels/cpu/ops.h) against kernels/ref over awkward shapes
// (1, 3, 129, sizes that are not multiples of a vector or a thread chunk) and thread counts,
// with NaN checks: the production model runs these, the references are the truth.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "inferlab/device/device.h"
#include "inferlab/support/rng.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/ops_rows.h"
#include "kernels/cpu/vec_exp.h"
#include "kernels/ref/ops.h"
#include "matmul_checks.h"

namespace inferlab {
namespace {

void expect_close(const std::vector<float>& got, const std::vector<float>& want, float tol, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i) {
    ASSERT_TRUE(std::isfinite(got[i])) << what << " [" << i << "]";
    ASSERT_NEAR(got[i], want[i], tol * std::max(1.0f, std::fabs(want[i]))) << what << " [" << i << "]";
  }
}

struct Shape {
  int rows, width;
};
const Shape kShapes[] = {{1, 1}, {1, 64}, {3, 129}, {129, 3}, {7, 288}, {33, 1000}, {2, 4099}};

TEST(CpuOps, RmsnormMatchesRef) {
  for (int threads : {1, 3})
    for (const Shape& s : kShapes) {
      ThreadPool pool(threads);
      const auto x = testing::random_normal(static_cast<std::size_t>(s.rows) * s.width, 1, 3.0);
      const auto w = testing::random_normal(static_cast<std::size_t>(s.width), 2);
      std::vector<float> want(x.size()), got(x.size(), std::nanf(""));
      for (int r = 0; r < s.rows; ++r)
        ref::rmsnorm(&want[static_cast<std::size_t>(r) * s.width], &x[static_cast<std::size_t>(r) * s.width], w.data(),
                     s.width, 1e-5f);
      cpu::rmsnorm(x.data(), w.data(), got.data(), s.rows, s.width, 1e-5f, pool);
      expect_close(got, want, 1e-6f, "rmsnorm");
      std::vector<float> in_place = x;  // out may alias x
      cpu::rmsnorm(in_place.data(), w.data(), in_place.data(), s.rows, s.width, 1e-5f, pool);
      expect_close(in_place, want, 1e-6f, "rmsnorm in place");
    }
}

TEST(CpuOps, RopeMatchesRefForBothStylesAndGqa) {
  ThreadPool pool(2);
  for (RopeStyle style : {RopeStyle::kInterleaved, RopeStyle::kHalf})
    for (int head_dim : {2, 8, 48, 64})
      for (int rows : {1, 3, 129}) {
        const int n_heads = 6, n_kv_heads = 2;
        const float theta = 10000.0f;
        std::vector<float> inv_freq(static_cast<std::size_t>(head_dim / 2));
        for (int j = 0; j < head_dim / 2; ++j)
          inv_freq[static_cast<std::size_t>(j)] =
              1.0f / std::pow(theta, static_cast<float>(2 * j) / static_cast<float>(head_dim));
        std::vector<int> positions(static_cast<std::size_t>(rows));
        for (int r = 0; r < rows; ++r) positions[static_cast<std::size_t>(r)] = (r * 37) % 500;
        auto q = testing::random_normal(static_cast<std::size_t>(rows) * n_heads * head_dim, 3);
        auto k = testing::random_normal(static_cast<std::size_t>(rows) * n_kv_heads * head_dim, 4);
        std::vector<float> want_q = q, want_k = k;
        for (int r = 0; r < rows; ++r) {
          ref::rope(&want_q[static_cast<std::size_t>(r) * n_heads * head_dim], n_heads, head_dim,
                    positions[static_cast<std::size_t>(r)], theta, style);
          ref::rope(&want_k[static_cast<std::size_t>(r) * n_kv_heads * head_dim], n_kv_heads, head_dim,
                    positions[static_cast<std::size_t>(r)], theta, style);
        }
        cpu::rope(q.data(), k.data(), positions.data(), rows, n_heads, n_kv_heads, head_dim, inv_freq.data(), style,
                  pool);
        expect_close(q, want_q, 1e-5f, "rope q");
        expect_close(k, want_k, 1e-5f, "rope k");
      }
}

TEST(CpuOps, SwigluAddBiasAndAddMatchRef) {
  for (int threads : {1, 2})
    for (const Shape& s : kShapes) {
      ThreadPool pool(threads);
      const std::size_t n = static_cast<std::size_t>(s.rows) * s.width;
      const auto gate = testing::random_normal(n, 5, 4.0), up = testing::random_normal(n, 6);
      std::vector<float> want = gate, got = gate;
      ref::swiglu(want.data(), up.data(), static_cast<int>(n));
      cpu::swiglu(got.data(), up.data(), n, pool);
      expect_close(got, want, 1e-6f, "swiglu");

      const auto b = testing::random_normal(static_cast<std::size_t>(s.width), 7);
      want = gate;
      got = gate;
      ref::add_bias(want.data(), b.data(), s.rows, s.width);
      cpu::add_bias(got.data(), b.data(), s.rows, s.width, pool);
      expect_close(got, want, 0.0f, "add_bias");

      want = gate;
      got = gate;
      ref::add(want.data(), up.data(), static_cast<int>(n));
      cpu::add(got.data(), up.data(), n, pool);
      expect_close(got, want, 0.0f, "add");
    }
}

// The vector exp behind SwiGLU and flash's softmax (kernels/cpu/vec_exp.h) over the whole range
// SiLU feeds it (x = -gate, either sign), against libm; its clamps at both ends; NaN stays NaN.
TEST(CpuOps, VectorExpMatchesLibmAndKeepsNaN) {
  using F8 = cpu::row_ops::F8;
  using I8 = cpu::row_ops::I8;
  for (float x0 = -100.0f; x0 <= 100.0f; x0 += 0.37f) {
    F8 x;
    for (int i = 0; i < 8; ++i) x[i] = x0 + 0.01f * static_cast<float>(i);
    F8 e = x;
    cpu::exp_lanes<F8, I8>(e);
    for (int i = 0; i < 8; ++i) {
      if (x[i] < -87.0f)
        EXPECT_LT(e[i], 2e-38f) << x[i];
      else if (x[i] > 88.0f)
        EXPECT_FLOAT_EQ(e[i], std::exp(88.0f)) << x[i];
      else
        EXPECT_NEAR(e[i], std::exp(x[i]), 4e-7f * std::exp(x[i])) << x[i];
    }
  }
  F8 special = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 1.0f, -NAN, 88.0f};
  cpu::exp_lanes<F8, I8>(special);
  EXPECT_TRUE(std::isnan(special[0]));
  EXPECT_FLOAT_EQ(special[1], std::exp(88.0f));
  EXPECT_LT(special[2], 2e-38f);
  EXPECT_EQ(special[3], 1.0f);
  EXPECT_EQ(special[4], 1.0f);
  EXPECT_NEAR(special[5], std::exp(1.0f), 4e-7f * std::exp(1.0f));
  EXPECT_TRUE(std::isnan(special[6]));
  // SwiGLU keeps a NaN gate NaN (as std::exp did) and a large one finite.
  std::vector<float> gate = {NAN, 200.0f, -200.0f, 1.0f}, up = {1.0f, 1.0f, 1.0f, 2.0f};
  cpu::row_ops::swiglu_range(gate.data(), up.data(), 0, gate.size());
  EXPECT_TRUE(std::isnan(gate[0]));
  EXPECT_FLOAT_EQ(gate[1], 200.0f);
  EXPECT_LE(std::fabs(gate[2]), 1e-30f);
  EXPECT_NEAR(gate[3], 2.0f / (1.0f + std::exp(-1.0f)), 1e-6f);
}

TEST(CpuOps, EmbeddingGatherAndKvWriteMatchRef) {
  ThreadPool pool(2);
  const int vocab = 50, dim = 37, rows = 129;
  const auto table = testing::random_normal(static_cast<std::size_t>(vocab) * dim, 8);
  std::vector<int> tokens(rows);
  for (int r = 0; r < rows; ++r) tokens[static_cast<std::size_t>(r)] = (r * 7 + 3) % vocab;
  std::vector<float> want(static_cast<std::size_t>(rows) * dim), got(want.size(), std::nanf(""));
  ref::embedding(table.data(), tokens.data(), rows, dim, want.data());
  cpu::embedding(table.data(), tokens.data(), rows, dim, got.data(), pool);
  expect_close(got, want, 0.0f, "embedding");

  // KV write into a NaN-poisoned pool at scattered slots: written rows match, the rest stay NaN.
  const int kv_dim = 24, slots = 300;
  const auto k = testing::random_normal(static_cast<std::size_t>(rows) * kv_dim, 9), v = testing::random_normal(k.size(), 10);
  std::vector<int> slot(rows);
  for (int r = 0; r < rows; ++r) slot[static_cast<std::size_t>(r)] = (r * 131) % slots;  // distinct: 131 coprime
  std::vector<float> k_want(static_cast<std::size_t>(slots) * kv_dim, std::nanf("")), v_want = k_want;
  std::vector<float> k_got = k_want, v_got = v_want;
  ref::kv_write(k_want.data(), k.data(), slot.data(), rows, kv_dim);
  ref::kv_write(v_want.data(), v.data(), slot.data(), rows, kv_dim);
  cpu::kv_write_f32(k_got.data(), v_got.data(), k.data(), v.data(), slot.data(), rows, kv_dim, pool);
  for (std::size_t i = 0; i < k_want.size(); ++i) {
    ASSERT_EQ(std::isnan(k_want[i]), std::isnan(k_got[i])) << i;
    if (!std::isnan(k_want[i])) {
      ASSERT_EQ(k_want[i], k_got[i]) << i;
      ASSERT_EQ(v_want[i], v_got[i]) << i;
    }
  }
}

TEST(CpuOps, ZeroRowsTouchNothing) {
  ThreadPool pool(2);
  std::vector<float> out(8, std::nanf(""));
  const std::vector<float> w(8, 1.0f);
  cpu::rmsnorm(w.data(), w.data(), out.data(), 0, 8, 1e-5f, pool);
  cpu::swiglu(out.data(), w.data(), 0, pool);
  cpu::add(out.data(), w.data(), 0, pool);
  for (float x : out) EXPECT_TRUE(std::isnan(x));
}

}  // namespace
}  // namespace inferlab
