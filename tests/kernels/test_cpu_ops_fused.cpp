// The fused elementwise ops (kernels/cpu/ops_fused.h) against the unfused sequences they stand
// for, bit for bit, over awkward shapes and thread counts: [device] fuse = true must change the
// speed of a run, never its results.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "inferlab/support/rng.h"
#include "kernels/cpu/matmul_int8_act.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/ops_fused.h"
#include "kernels/ref/matmul_int8.h"
#include "matmul_checks.h"

namespace inferlab {
namespace {

template <class T>
void expect_same_bits(const std::vector<T>& got, const std::vector<T>& want, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i)
    ASSERT_EQ(std::memcmp(&got[i], &want[i], sizeof(T)), 0) << what << " [" << i << "]: " << +got[i] << " vs " << +want[i];
}

struct Shape {
  int rows, width;
};
// Widths that are and are not multiples of the 32-value activation block.
const Shape kShapes[] = {{1, 1}, {1, 64}, {3, 129}, {129, 3}, {7, 288}, {33, 1000}, {2, 4099}};

TEST(CpuOpsFused, ResidualRmsnormEqualsAddThenRmsnormThenQuantise) {
  for (int threads : {1, 3})
    for (const Shape& s : kShapes) {
      SCOPED_TRACE(std::to_string(threads) + " threads, " + std::to_string(s.rows) + "x" + std::to_string(s.width));
      ThreadPool pool(threads);
      const std::size_t n = static_cast<std::size_t>(s.rows) * s.width;
      const std::size_t nb = static_cast<std::size_t>(s.rows) * ref::act_blocks(s.width);
      const auto x0 = testing::random_normal(n, 1, 3.0), y = testing::random_normal(n, 2), w = testing::random_normal(static_cast<std::size_t>(s.width), 3);
      // Unfused: add, rmsnorm, quantise.
      std::vector<float> x_want = x0, out_want(n);
      std::vector<std::int8_t> q_want(n);
      std::vector<float> s_want(nb);
      cpu::add(x_want.data(), y.data(), n, pool);
      cpu::rmsnorm(x_want.data(), w.data(), out_want.data(), s.rows, s.width, 1e-5f, pool);
      cpu::quantize_act_rows(out_want.data(), s.rows, s.width, q_want.data(), s_want.data(), pool);
      // Fused, every combination of outputs.
      for (bool add : {false, true})
        for (bool want_out : {false, true})
          for (bool want_act : {false, true}) {
            std::vector<float> x = x0, out(n, std::nanf(""));
            std::vector<std::int8_t> q(n, 99);
            std::vector<float> sc(nb, std::nanf(""));
            cpu::residual_rmsnorm(x.data(), add ? y.data() : nullptr, w.data(), want_out ? out.data() : nullptr,
                                  {want_act ? q.data() : nullptr, sc.data()}, s.rows, s.width, 1e-5f, pool);
            if (!add) {  // norm of x0 alone
              std::vector<float> o(n);
              cpu::rmsnorm(x0.data(), w.data(), o.data(), s.rows, s.width, 1e-5f, pool);
              expect_same_bits(x, x0, "x untouched without y");
              if (want_out) expect_same_bits(out, o, "rmsnorm");
              continue;
            }
            expect_same_bits(x, x_want, "residual");
            if (want_out) expect_same_bits(out, out_want, "rmsnorm");
            if (want_act) {
              expect_same_bits(q, q_want, "codes");
              expect_same_bits(sc, s_want, "scales");
            }
          }
    }
}

TEST(CpuOpsFused, RopeKvWriteEqualsRopeThenKvWrite) {
  ThreadPool pool(2);
  for (RopeStyle style : {RopeStyle::kInterleaved, RopeStyle::kHalf})
    for (int head_dim : {2, 8, 64})
      for (int rows : {1, 3, 129}) {
        SCOPED_TRACE(std::to_string(head_dim) + " head_dim, " + std::to_string(rows) + " rows");
        const int n_heads = 6, n_kv_heads = 2, kvd = n_kv_heads * head_dim, slots_n = 2 * rows + 5;
        const auto q0 = testing::random_normal(static_cast<std::size_t>(rows) * n_heads * head_dim, 4);
        const auto k0 = testing::random_normal(static_cast<std::size_t>(rows) * kvd, 5);
        const auto v = testing::random_normal(static_cast<std::size_t>(rows) * kvd, 6);
        const auto inv_freq = testing::random_normal(static_cast<std::size_t>(head_dim / 2), 7, 0.1);
        std::vector<int> positions(static_cast<std::size_t>(rows)), slots(static_cast<std::size_t>(rows));
        for (int r = 0; r < rows; ++r) {
          positions[static_cast<std::size_t>(r)] = 3 * r + 1;
          slots[static_cast<std::size_t>(r)] = (7 * r + 2) % slots_n;  // scattered, distinct
        }
        std::vector<float> q_want = q0, k_want = k0, kc_want(static_cast<std::size_t>(slots_n) * kvd, 0.5f),
                           vc_want = kc_want;
        cpu::rope(q_want.data(), k_want.data(), positions.data(), rows, n_heads, n_kv_heads, head_dim, inv_freq.data(),
                  style, pool);
        cpu::kv_write_f32(kc_want.data(), vc_want.data(), k_want.data(), v.data(), slots.data(), rows, kvd, pool);
        std::vector<float> q = q0, k = k0, kc(kc_want.size(), 0.5f), vc = kc;
        cpu::rope_kv_write_f32(q.data(), k.data(), v.data(), positions.data(), slots.data(), rows, n_heads, n_kv_heads,
                               head_dim, inv_freq.data(), style, kc.data(), vc.data(), pool);
        expect_same_bits(q, q_want, "q");
        expect_same_bits(k, k_want, "k");
        expect_same_bits(kc, kc_want, "k cache");
        expect_same_bits(vc, vc_want, "v cache");
      }
}

TEST(CpuOpsFused, SwigluQuantizeEqualsSwigluThenQuantise) {
  for (int threads : {1, 3})
    for (const Shape& s : kShapes) {
      SCOPED_TRACE(std::to_string(s.rows) + "x" + std::to_string(s.width));
      ThreadPool pool(threads);
      const std::size_t n = static_cast<std::size_t>(s.rows) * s.width;
      const std::size_t nb = static_cast<std::size_t>(s.rows) * ref::act_blocks(s.width);
      const auto gate0 = testing::random_normal(n, 8, 2.0), up = testing::random_normal(n, 9);
      std::vector<float> gate_want = gate0, s_want(nb), gate = gate0, sc(nb);
      std::vector<std::int8_t> q_want(n), q(n);
      cpu::swiglu(gate_want.data(), up.data(), n, pool);
      cpu::quantize_act_rows(gate_want.data(), s.rows, s.width, q_want.data(), s_want.data(), pool);
      cpu::swiglu_quantize(gate.data(), up.data(), {q.data(), sc.data()}, s.rows, s.width, pool);
      expect_same_bits(gate, gate_want, "swiglu");
      expect_same_bits(q, q_want, "codes");
      expect_same_bits(sc, s_want, "scales");
    }
}

}  // namespace
}  // namespace inferlab
