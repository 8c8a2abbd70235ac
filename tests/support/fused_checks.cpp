// The fused decode ops of a device against kernels/ref/ops_fused.h (see fused_checks.h).
#include "fused_checks.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "inferlab/support/rng.h"
#include "kernels/ref/matmul_int8.h"
#include "kernels/ref/ops_fused.h"

namespace inferlab::testing {
namespace {

constexpr double kRel = 1e-5;

std::vector<float> normal(std::size_t n, std::uint64_t seed, double scale = 1.0) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(scale * rng.normal());
  return v;
}

// Device memory holding `host`, and back.
template <class T>
Buffer to_dev(Device& d, const std::vector<T>& host) {
  Buffer b(d, std::max<std::size_t>(host.size(), 1) * sizeof(T));
  d.copy_to_device(b.data(), host.data(), host.size() * sizeof(T));
  return b;
}
template <class T>
std::vector<T> to_host(Device& d, const Buffer& b, std::size_t n) {
  std::vector<T> host(n);
  d.copy_to_host(host.data(), b.data(), n * sizeof(T));
  return host;
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i) {
    ASSERT_FALSE(std::isnan(got[i])) << what << " [" << i << "] not written";
    ASSERT_LE(std::fabs(double{got[i]} - want[i]), kRel * (1.0 + std::fabs(double{want[i]}))) << what << " [" << i << "]";
  }
}

void expect_codes_close(const std::vector<std::int8_t>& q, const std::vector<float>& s,
                        const std::vector<std::int8_t>& q_want, const std::vector<float>& s_want,
                        const std::string& what) {
  ASSERT_EQ(q.size(), q_want.size()) << what;
  for (std::size_t i = 0; i < q.size(); ++i)
    ASSERT_LE(std::abs(int{q[i]} - int{q_want[i]}), 1) << what << " code [" << i << "]";
  expect_close(s, s_want, what + " scales");
}

struct Shape {
  int rows, width;
};
const Shape kShapes[] = {{1, 1}, {1, 64}, {3, 129}, {129, 3}, {3, 576}, {2, 2049}};

void residual_rmsnorm_cases(ComputeDevice& dev) {
  for (const Shape& sh : kShapes)
    for (bool add : {false, true})
      for (int outputs = 1; outputs <= 3; ++outputs) {  // bit 0: out, bit 1: act blocks
        const std::string what = "residual_rmsnorm " + std::to_string(sh.rows) + "x" + std::to_string(sh.width) +
                                 (add ? " +y" : "") + " outputs " + std::to_string(outputs);
        const std::size_t n = static_cast<std::size_t>(sh.rows) * sh.width;
        const std::size_t nb = static_cast<std::size_t>(sh.rows) * ref::act_blocks(sh.width);
        const auto x0 = normal(n, 1, 3.0), y = normal(n, 2), w = normal(static_cast<std::size_t>(sh.width), 3);
        std::vector<float> x_want = x0, out_want(n), s_want(nb);
        std::vector<std::int8_t> q_want(n);
        ref::residual_rmsnorm(x_want.data(), add ? y.data() : nullptr, w.data(), out_want.data(), q_want.data(),
                              s_want.data(), sh.rows, sh.width, 1e-5f);
        Buffer dx = to_dev(dev, x0), dy = to_dev(dev, y), dw = to_dev(dev, w);
        Buffer dout = to_dev(dev, std::vector<float>(n, std::nanf(""))), ds = to_dev(dev, std::vector<float>(nb, std::nanf("")));
        Buffer dq = to_dev(dev, std::vector<std::int8_t>(n, 99));
        dev.residual_rmsnorm(dx.as<float>(), add ? dy.as<float>() : nullptr, dw.as<float>(),
                             outputs & 1 ? dout.as<float>() : nullptr, outputs & 2 ? dq.as<std::int8_t>() : nullptr,
                             ds.as<float>(), sh.rows, sh.width, 1e-5f);
        expect_close(to_host<float>(dev, dx, n), x_want, what + " x");
        if (outputs & 1) expect_close(to_host<float>(dev, dout, n), out_want, what + " out");
        if (outputs & 2)
          expect_codes_close(to_host<std::int8_t>(dev, dq, n), to_host<float>(dev, ds, nb), q_want, s_want, what);
        else
          EXPECT_EQ(to_host<std::int8_t>(dev, dq, n), std::vector<std::int8_t>(n, 99)) << what << ": codes written";
      }
}

void rope_kv_write_cases(ComputeDevice& dev) {
  const float theta = 10000.0f;
  for (RopeStyle style : {RopeStyle::kInterleaved, RopeStyle::kHalf})
    for (int rows : {1, 3, 129}) {
      const int n_heads = 6, n_kv = 2, hd = 64, slots_total = 300;
      const std::string what = std::string("rope_kv_write_f32 ") + (style == RopeStyle::kHalf ? "half " : "pairs ") +
                               std::to_string(rows) + " rows";
      std::vector<float> inv(hd / 2);
      for (int j = 0; j < hd / 2; ++j) inv[j] = 1.0f / std::pow(theta, static_cast<float>(2 * j) / static_cast<float>(hd));
      const std::size_t qn = static_cast<std::size_t>(rows) * n_heads * hd, kn = static_cast<std::size_t>(rows) * n_kv * hd;
      const std::size_t cache_n = static_cast<std::size_t>(slots_total) * n_kv * hd;
      auto q = normal(qn, 4), k = normal(kn, 5);
      const auto v = normal(kn, 6);
      std::vector<int> pos(rows), slots(rows);
      for (int r = 0; r < rows; ++r) {
        pos[r] = (r * 37 + 11) % 2000;
        slots[r] = (r * 7 + 3) % slots_total;  // distinct for rows < 300 (7 and 300 are coprime)
      }
      std::vector<float> q_want = q, k_want = k, kc_want(cache_n, 0.5f), vc_want(cache_n, 0.5f);
      ref::rope_kv_write_f32(q_want.data(), k_want.data(), v.data(), pos.data(), slots.data(), rows, n_heads, n_kv, hd,
                             theta, style, kc_want.data(), vc_want.data());
      Buffer dq = to_dev(dev, q), dk = to_dev(dev, k), dv = to_dev(dev, v), dpos = to_dev(dev, pos),
             dslots = to_dev(dev, slots), dinv = to_dev(dev, inv);
      Buffer dkc = to_dev(dev, std::vector<float>(cache_n, 0.5f)), dvc = to_dev(dev, std::vector<float>(cache_n, 0.5f));
      dev.rope_kv_write_f32(dq.as<float>(), dk.as<float>(), dv.as<float>(), dpos.as<int>(), dslots.as<int>(), rows,
                            n_heads, n_kv, hd, dinv.as<float>(), style, dkc.as<float>(), dvc.as<float>());
      expect_close(to_host<float>(dev, dq, qn), q_want, what + " q");
      expect_close(to_host<float>(dev, dk, kn), k_want, what + " k");
      expect_close(to_host<float>(dev, dkc, cache_n), kc_want, what + " k cache");  // other slots untouched
      expect_close(to_host<float>(dev, dvc, cache_n), vc_want, what + " v cache");
    }
}

void swiglu_quantize_cases(ComputeDevice& dev) {
  for (const Shape& sh : kShapes) {
    const std::string what = "swiglu_quantize " + std::to_string(sh.rows) + "x" + std::to_string(sh.width);
    const std::size_t n = static_cast<std::size_t>(sh.rows) * sh.width;
    const std::size_t nb = static_cast<std::size_t>(sh.rows) * ref::act_blocks(sh.width);
    const auto gate = normal(n, 7, 2.0), up = normal(n, 8);
    std::vector<float> g_want = gate, s_want(nb);
    std::vector<std::int8_t> q_want(n);
    ref::swiglu_quantize(g_want.data(), up.data(), q_want.data(), s_want.data(), sh.rows, sh.width);
    Buffer dg = to_dev(dev, gate), du = to_dev(dev, up), dq = to_dev(dev, std::vector<std::int8_t>(n, 99)),
           ds = to_dev(dev, std::vector<float>(nb, std::nanf("")));
    dev.swiglu_quantize(dg.as<float>(), du.as<float>(), dq.as<std::int8_t>(), ds.as<float>(), sh.rows, sh.width);
    expect_close(to_host<float>(dev, dg, n), g_want, what + " gate");
    expect_codes_close(to_host<std::int8_t>(dev, dq, n), to_host<float>(dev, ds, nb), q_want, s_want, what);
  }
}

}  // namespace

// Rows with ties, NaNs, -inf and a peaked or flat shape, for the token choice.
std::vector<std::vector<float>> token_choice_rows() {
  std::vector<std::vector<float>> rows;
  Rng rng(11);
  for (int vocab : {1, 7, 300, 32000}) {
    std::vector<float> r(static_cast<std::size_t>(vocab));
    for (float& x : r) x = static_cast<float>(3.0 * rng.normal());
    rows.push_back(r);
    if (vocab < 7) continue;
    std::vector<float> tie = r;
    tie[2] = tie[static_cast<std::size_t>(vocab) - 1] = 50.0f;  // the lower index wins
    rows.push_back(tie);
    std::vector<float> nan = r;
    nan[3] = std::nanf("");
    nan[1] = -INFINITY;
    rows.push_back(nan);
    std::vector<float> nan0 = r;
    nan0[0] = std::nanf("");
    rows.push_back(nan0);
    rows.push_back(std::vector<float>(static_cast<std::size_t>(vocab), 0.25f));  // flat
  }
  return rows;
}

void expect_fused_ops_match_reference(ComputeDevice& device) {
  device.set_fuse(true);
  residual_rmsnorm_cases(device);
  rope_kv_write_cases(device);
  swiglu_quantize_cases(device);
}

}  // namespace inferlab::testing
