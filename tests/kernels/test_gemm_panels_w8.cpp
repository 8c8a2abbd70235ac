// The W8A16 panels (kernels/cpu/gemm_panels_w8.h) against the reference int8 matmul over awkward
// shapes: outputs not a multiple of a panel, in not a multiple of a vector, 1..9 rows and a
// prefill's worth, on 1 and 3 threads.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "inferlab/thread_pool.h"
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
