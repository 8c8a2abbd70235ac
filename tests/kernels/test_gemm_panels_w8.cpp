// The W8A16 panels (kernels/cpu/gemm_panels_w8.h) against the reference int8 matmul over awkward
// shapes: outputs not a multiple of a panel, in not a multiple of a vector, 1..9 rows and a
// prefill's worth, on 1 and 3 threads.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "inferlab/error.h"
#include "inferlab/thread_pool.h"
#include "kernels/cpu/gemm_panels_f32.h"
#include "kernels/cpu/gemm_panels_w8.h"
#include "kernels/ref/matmul_int8.h"
#include "matmul_checks.h"

namespace inferlab {
namespace {

TEST(GemmPanelsW8, MatchesTheReferenceOverAwkwardShapes) {
  struct Shape {
    int n, out, in;
  };
  const Shape shapes[] = {{1, 1, 1},    {1, 33, 100}, {2, 17, 576}, {3, 64, 300}, {4, 40, 2048},
                          {5, 31, 257}, {8, 96, 64},  {9, 50, 1000}, {40, 70, 333}};
  for (int threads : {1, 3}) {
    ThreadPool pool(threads);
    for (const Shape& s : shapes) {
      SCOPED_TRACE("n " + std::to_string(s.n) + " out " + std::to_string(s.out) + " in " + std::to_string(s.in) + ", " +
                   std::to_string(threads) + " threads");
      const std::vector<float> w = testing::random_normal(static_cast<std::size_t>(s.out) * s.in, s.in + 1, 0.05);
      const std::vector<float> x = testing::random_normal(static_cast<std::size_t>(s.n) * s.in, s.out + 2);
      std::vector<std::int8_t> q(w.size());
      std::vector<float> scale(static_cast<std::size_t>(s.out));
      ref::quantize_int8_rows(w.data(), s.out, s.in, q.data(), scale.data());
      const cpu::PackedPanelsW8 p = cpu::pack_panels_w8(q.data(), scale.data(), s.out, s.in);
      std::vector<float> got(static_cast<std::size_t>(s.n) * s.out, std::nanf(""));
      cpu::gemm_panels_w8(x.data(), p, got.data(), s.n, pool);
      std::vector<float> wq(w.size());  // the weights the codes stand for
      for (int o = 0; o < s.out; ++o)
        for (int i = 0; i < s.in; ++i)
          wq[static_cast<std::size_t>(o) * s.in + i] = scale[o] * q[static_cast<std::size_t>(o) * s.in + i];
      testing::expect_matmul_matches_reference(x, wq, got, s.n, s.out, s.in);
    }
  }
}

}  // namespace
}  // namespace inferlab

namespace inferlab {
namespace {

// A group reading one x (wq/wk/wv) gives each member's gemm_panels_w8 bits in one dispatch.
TEST(GemmPanelsW8, GroupGivesEachMembersBits) {
  ThreadPool pool(3);
  const int in = 288, outs[] = {96, 33, 33};
  std::vector<cpu::PackedPanelsW8> panels;
  for (int m = 0; m < 3; ++m) {
    const std::vector<float> w = testing::random_normal(static_cast<std::size_t>(outs[m]) * in, 50 + m, 0.05);
    std::vector<std::int8_t> q(w.size());
    std::vector<float> scale(static_cast<std::size_t>(outs[m]));
    ref::quantize_int8_rows(w.data(), outs[m], in, q.data(), scale.data());
    panels.push_back(cpu::pack_panels_w8(q.data(), scale.data(), outs[m], in));
  }
  for (int n : {1, 3, 4}) {
    const std::vector<float> x = testing::random_normal(static_cast<std::size_t>(n) * in, 60 + n);
    std::vector<std::vector<float>> alone(3), grouped(3);
    std::vector<cpu::GemmPanelsW8Output> group;
    for (int m = 0; m < 3; ++m) {
      alone[m].assign(static_cast<std::size_t>(n) * outs[m], 0.0f);
      grouped[m].assign(alone[m].size(), std::nanf(""));
      cpu::gemm_panels_w8(x.data(), panels[m], alone[m].data(), n, pool);
      group.push_back({&panels[m], grouped[m].data()});
    }
    cpu::gemm_panels_w8_group(x.data(), group, n, pool);
    for (int m = 0; m < 3; ++m) EXPECT_EQ(grouped[m], alone[m]) << "member " << m << ", " << n << " rows";
  }
}

// A group whose matrices read inputs of different widths is refused by name, before anything runs
// (the W8A16 and the fp32 panels share the check: gemm_panels_impl.h's gemm_panels_outputs).
TEST(GemmPanelsW8, GroupOfDifferentInputWidthsIsRefused) {
  ThreadPool pool(2);
  const std::vector<std::int8_t> q(64, 1);
  const std::vector<float> scale(4, 1.0f), x(16, 1.0f);
  const auto a = cpu::pack_panels_w8(q.data(), scale.data(), 4, 16);
  const auto b = cpu::pack_panels_w8(q.data(), scale.data(), 4, 8);
  std::vector<float> ya(4, 7.0f), yb(4, 7.0f);
  const std::vector<cpu::GemmPanelsW8Output> group = {{&a, ya.data()}, {&b, yb.data()}};
  try {
    cpu::gemm_panels_w8_group(x.data(), group, 1, pool);
    FAIL() << "a group with in 16 and 8 ran";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("gemm_panels_w8_group: the matrices read one input, but their in differ (16 and 8)"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(ya, std::vector<float>(4, 7.0f));

  const std::vector<float> w(64, 1.0f);
  const auto fa = cpu::pack_panels_f32(w.data(), 4, 16);
  const auto fb = cpu::pack_panels_f32(w.data(), 4, 8);
  const std::vector<cpu::GemmPanelsF32Output> fgroup = {{&fa, ya.data()}, {&fb, yb.data()}};
  EXPECT_THROW(cpu::gemm_panels_f32_group(x.data(), fgroup, 1, pool), Error);
}

}  // namespace
}  // namespace inferlab
