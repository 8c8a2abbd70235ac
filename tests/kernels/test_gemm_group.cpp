// The grouped entry points of the packed GEMMs (gemm_gguf_group, gemm_panels_int8_group) and the
// byte-balanced cut of a union of panels behind them (kernels/cpu/panel_union.h): a group gives
// every member exactly the bits of its own call, in one pool dispatch where the members alone
// would pay one each (or none at all, one thread doing the work).
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <span>
#include <thread>
#include <vector>


#include "gguf_block_fixtures.h"
#include "inferlab/error.h"
#include "inferlab/support/rng.h"
#include "inferlab/thread_pool.h"
#include "kernels/cpu/gemm_gguf.h"
#include "kernels/cpu/gemm_panels_f32.h"
#include "kernels/cpu/gemm_panels_int8.h"
#include "kernels/cpu/matmul_int8_act.h"
#include "kernels/cpu/panel_union.h"
#include "kernels/ref/matmul_int8.h"

namespace inferlab {
namespace {

constexpr float kNan = std::numeric_limits<float>::quiet_NaN();

void expect_same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i)
    ASSERT_EQ(std::memcmp(&a[i], &b[i], sizeof(float)), 0) << "element " << i << ": " << a[i] << " vs " << b[i];
}

// Each of the packed matrices w (of type W, with W::out) run alone through alone(m, y) and all
// together through group(outputs) (Out = {const W*, float* y}): the same bits, in at most
// `max_dispatches` pool dispatches for the group.
template <class Out, class W, class Alone, class Group>
void expect_group_bits(const std::vector<W>& w, int n, ThreadPool& pool, std::uint64_t max_dispatches, Alone alone,
                       Group group) {
  std::vector<std::vector<float>> lone, grouped;  // [n, out] each
  std::vector<Out> outputs;
  for (const W& m : w) {
    lone.emplace_back(static_cast<std::size_t>(n) * m.out, kNan);
    grouped.emplace_back(static_cast<std::size_t>(n) * m.out, kNan);
    alone(m, lone.back().data());
  }
  for (std::size_t i = 0; i < w.size(); ++i) outputs.push_back({&w[i], grouped[i].data()});
  const std::uint64_t d0 = pool.dispatches();
  group(std::span<const Out>(outputs));
  EXPECT_LE(pool.dispatches() - d0, max_dispatches);
  for (std::size_t i = 0; i < w.size(); ++i) expect_same_bits(grouped[i], lone[i]);
}

// x [n, in] quantised per 32-block: xq [n, in], xs [n, act_blocks(in)].
struct Acts {
  std::vector<std::int8_t> xq;
  std::vector<float> xs;
  Acts(int n, int in, std::uint64_t seed) : xq(static_cast<std::size_t>(n) * in), xs(static_cast<std::size_t>(n) * ref::act_blocks(in)) {
    Rng rng(seed);
    std::vector<float> x(xq.size());
    for (float& v : x) v = static_cast<float>(rng.normal());
    ref::quantize_act_rows(x.data(), n, in, xq.data(), xs.data());
  }
};

TEST(PanelUnion, CutsContiguousRunsOfAboutEqualBytes) {
  // SmolLM2's q/k/v at Q8_0: 18 + 6 + 6 panels of one size, two threads: 15 panels each.
  const cpu::PanelSpan qkv[] = {{18, 1088}, {6, 1088}, {6, 1088}};
  std::vector<std::size_t> cuts(3);
  cpu::cut_panel_union(qkv, 2, cuts);
  EXPECT_EQ(cuts, (std::vector<std::size_t>{0, 15, 30}));
  // Panels of different sizes: the cut follows the bytes (1600 in all), not the panel count.
  const cpu::PanelSpan mixed[] = {{4, 100}, {4, 300}};
  cpu::cut_panel_union(mixed, 2, cuts);
  EXPECT_EQ(cuts, (std::vector<std::size_t>{0, 5, 8}));
  // More runs than panels: some runs are empty, every panel is still in exactly one.
  const cpu::PanelSpan two[] = {{1, 10}, {1, 10}};
  std::vector<std::size_t> five(6);
  cpu::cut_panel_union(two, 5, five);
  EXPECT_EQ(five.front(), 0u);
  EXPECT_EQ(five.back(), 2u);
  for (std::size_t t = 0; t + 1 < five.size(); ++t) EXPECT_LE(five[t], five[t + 1]);
  EXPECT_THROW(cpu::cut_panel_union(two, 2, five), Error);
}

TEST(PanelUnion, RunsEveryPanelOnceInOneDispatch) {
  const cpu::PanelSpan members[] = {{7, 64}, {3, 512}, {11, 16}};
  for (int threads : {1, 2, 3})
    for (std::size_t grain : {std::size_t{1}, std::size_t{4}, std::size_t{100}})
      for (std::size_t claim : {std::size_t{0}, std::size_t{1}, std::size_t{2}}) {
        SCOPED_TRACE(std::to_string(threads) + " threads, grain " + std::to_string(grain) + ", claim " + std::to_string(claim));
        ThreadPool pool(threads);
        std::vector<std::vector<int>> seen = {std::vector<int>(7), std::vector<int>(3), std::vector<int>(11)};
        const std::uint64_t d0 = pool.dispatches();
        cpu::parallel_for_panel_union(members, grain, claim, pool, [&](int m, int p0, int p1) {
          for (int p = p0; p < p1; ++p) ++seen[static_cast<std::size_t>(m)][static_cast<std::size_t>(p)];  // disjoint
        });
        for (const auto& s : seen)
          for (int c : s) EXPECT_EQ(c, 1);
        // 21 panels: one dispatch when they are worth two threads or more, none otherwise.
        EXPECT_EQ(pool.dispatches() - d0, threads > 1 && grain < 21 ? 1u : 0u);
      }
}

// A thread held up at its share's first claim: the other takes the rest of that share from its
// back, so the delayed thread runs only that claim of its share's 20 panels (all 20 without the
// stealing, or with claim 0). The hold ends on what the other thread has run, not on a clock: all
// but the held claim (its own 20 with claim 0), so a starved scheduler only slows the test; 120 s
// without it is a failure (the stealing is broken), not a hang.
TEST(PanelUnion, ADelayedThreadsPanelsAreTakenByTheOther) {
  const cpu::PanelSpan members[] = {{25, 64}, {15, 64}};
  for (std::size_t claim : {std::size_t{1}, std::size_t{2}, std::size_t{0}}) {
    SCOPED_TRACE("claim " + std::to_string(claim));
    ThreadPool pool(2);
    std::mutex m;
    std::map<std::thread::id, int> ran;  // panels per thread
    std::thread::id delayed;
    cpu::parallel_for_panel_union(members, 1, claim, pool, [&](int member, int p0, int p1) {
      if (member == 0 && p0 == 0) {
        delayed = std::this_thread::get_id();
        auto others = [&] {
          const std::lock_guard<std::mutex> lock(m);
          int k = 0;
          for (const auto& [id, n] : ran)
            if (id != delayed) k += n;
          return k;
        };
        const int want = claim == 0 ? 20 : 40 - static_cast<int>(claim);
        const auto start = std::chrono::steady_clock::now();
        while (others() < want && std::chrono::steady_clock::now() - start < std::chrono::seconds(120))
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      const std::lock_guard<std::mutex> lock(m);
      ran[std::this_thread::get_id()] += p1 - p0;
    });
    int total = 0;
    for (const auto& [id, n] : ran) total += n;
    EXPECT_EQ(total, 40);
    if (claim == 0) EXPECT_EQ(ran[delayed], 20);
    else EXPECT_EQ(ran[delayed], static_cast<int>(claim));
  }
}

// Gemm_gguf matrices of mixed types reading one input, out not a multiple of 32 (at in = 512
// the K-quants beside Q8_0, as Q4_K_M / Q5_K_M files' layers mix them).
TEST(GemmGgufGroup, GivesEachMemberItsOwnBitsInOneDispatch) {
  if (!cpu::gemm_gguf_available()) GTEST_SKIP() << "this build has neither AVX-512 VNNI nor AVX2";
  struct Member {
    GgmlType type;
    int out;
  };
  for (int in : {96, 576, 512}) {
    const std::vector<Member> spec =
        in == 512 ? std::vector<Member>{{GgmlType::kQ4_K, 70}, {GgmlType::kQ6_K, 33}, {GgmlType::kQ8_0, 200}, {GgmlType::kQ5_K, 40}}
                  : std::vector<Member>{{GgmlType::kQ8_0, 70}, {GgmlType::kQ4_0, 33}, {GgmlType::kQ4_1, 200}};
    std::vector<cpu::PackedGguf> w;
    std::uint64_t seed = 5;
    for (const Member& m : spec) w.push_back(cpu::pack_gguf(m.type, testing::random_gguf_blocks(m.type, m.out, in, ++seed), m.out, in));
    for (int n : {1, 7})
      for (int threads : {1, 2, 3}) {
        SCOPED_TRACE("in " + std::to_string(in) + ", " + std::to_string(n) + " rows, " + std::to_string(threads) + " threads");
        ThreadPool pool(threads);
        const Acts a(n, in, 40 + static_cast<std::uint64_t>(n));
        expect_group_bits<cpu::GemmGgufOutput>(
            w, n, pool, 1, [&](const cpu::PackedGguf& m, float* y) { cpu::gemm_gguf(a.xq.data(), a.xs.data(), m, y, n, pool); },
            [&](auto group) { cpu::gemm_gguf_group(a.xq.data(), a.xs.data(), group, n, pool); });
      }
  }
}

// SmolLM2's q/k/v at decode: alone 3 dispatches (k and v, 6 panels, are each split in two), grouped 1.
TEST(GemmGgufGroup, SmallMatricesShareOneHandOff) {
  if (!cpu::gemm_gguf_available()) GTEST_SKIP() << "this build has neither AVX-512 VNNI nor AVX2";
  const int in = 576, outs[] = {576, 192, 192};
  ThreadPool pool(2);
  std::vector<cpu::PackedGguf> w;
  std::vector<std::vector<float>> y;
  std::vector<cpu::GemmGgufOutput> group;
  for (int out : outs) {
    w.push_back(cpu::pack_gguf(GgmlType::kQ8_0, testing::random_gguf_blocks(GgmlType::kQ8_0, out, in, 9), out, in));
    y.emplace_back(static_cast<std::size_t>(out), kNan);
  }
  for (std::size_t i = 0; i < w.size(); ++i) group.push_back({&w[i], y[i].data()});
  const Acts a(1, in, 3);
  const std::uint64_t d0 = pool.dispatches();
  for (const auto& m : group) cpu::gemm_gguf(a.xq.data(), a.xs.data(), *m.w, m.y, 1, pool);
  const std::uint64_t d1 = pool.dispatches();
  cpu::gemm_gguf_group(a.xq.data(), a.xs.data(), group, 1, pool);
  EXPECT_EQ(d1 - d0, 3u);
  EXPECT_EQ(pool.dispatches() - d1, 1u);
}

TEST(GemmGgufGroup, RefusesMembersOfDifferentIn) {
  if (!cpu::gemm_gguf_available()) GTEST_SKIP() << "this build has neither AVX-512 VNNI nor AVX2";
  const cpu::PackedGguf a = cpu::pack_gguf(GgmlType::kQ8_0, testing::random_gguf_blocks(GgmlType::kQ8_0, 4, 32, 1), 4, 32);
  const cpu::PackedGguf b = cpu::pack_gguf(GgmlType::kQ8_0, testing::random_gguf_blocks(GgmlType::kQ8_0, 4, 64, 2), 4, 64);
  std::vector<float> ya(4), yb(4);
  const Acts x(1, 32, 1);
  const cpu::GemmGgufOutput group[] = {{&a, ya.data()}, {&b, yb.data()}};
  ThreadPool pool(1);
  EXPECT_THROW(cpu::gemm_gguf_group(x.xq.data(), x.xs.data(), group, 1, pool), Error);
}

cpu::PackedPanelsInt8 random_int8_panels(int out, int in, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<float> w(static_cast<std::size_t>(out) * in);
  for (float& v : w) v = static_cast<float>(rng.normal());
  std::vector<std::int8_t> q(w.size());
  std::vector<float> scale(static_cast<std::size_t>(out));
  ref::quantize_int8_rows(w.data(), out, in, q.data(), scale.data());
  return cpu::pack_panels_int8(q.data(), scale.data(), out, in);
}

TEST(GemmPanelsInt8Group, GivesEachMemberItsOwnBits) {
  if (!cpu::gemm_panels_int8_available()) GTEST_SKIP() << "this build has no int8 panels (neither AVX-512 VNNI nor AVX2)";
  for (int in : {70, 576})
    for (int n : {1, 7})
      for (int threads : {1, 2, 3}) {
        SCOPED_TRACE("in " + std::to_string(in) + ", " + std::to_string(n) + " rows, " + std::to_string(threads) + " threads");
        ThreadPool pool(threads);
        std::vector<cpu::PackedPanelsInt8> w;
        for (int out : {150, 37, 1000}) w.push_back(random_int8_panels(out, in, static_cast<std::uint64_t>(out + in)));
        const Acts a(n, in, 11);
        expect_group_bits<cpu::GemmPanelsInt8Output>(
            w, n, pool, 1,
            [&](const cpu::PackedPanelsInt8& m, float* y) { cpu::gemm_panels_int8(a.xq.data(), a.xs.data(), m, y, n, pool); },
            [&](auto group) { cpu::gemm_panels_int8_group(a.xq.data(), a.xs.data(), group, n, pool); });
      }
}

// SmolLM2's w1/w3 at decode: 48 panels each, two dispatches alone, one grouped.
TEST(GemmPanelsInt8Group, GateAndUpShareOneHandOff) {
  if (!cpu::gemm_panels_int8_available()) GTEST_SKIP() << "this build has no int8 panels (neither AVX-512 VNNI nor AVX2)";
  ThreadPool pool(2);
  const cpu::PackedPanelsInt8 w1 = random_int8_panels(1536, 576, 1), w3 = random_int8_panels(1536, 576, 2);
  std::vector<float> h1(1536), h3(1536);
  const Acts a(1, 576, 3);
  const std::uint64_t d0 = pool.dispatches();
  cpu::gemm_panels_int8(a.xq.data(), a.xs.data(), w1, h1.data(), 1, pool);
  cpu::gemm_panels_int8(a.xq.data(), a.xs.data(), w3, h3.data(), 1, pool);
  const std::uint64_t d1 = pool.dispatches();
  const cpu::GemmPanelsInt8Output group[] = {{&w1, h1.data()}, {&w3, h3.data()}};
  cpu::gemm_panels_int8_group(a.xq.data(), a.xs.data(), group, 1, pool);
  EXPECT_EQ(d1 - d0, 2u);
  EXPECT_EQ(pool.dispatches() - d1, 1u);
}

// fp32 panels (n > 1 packs x once for the group): each member's own bits, one dispatch.
TEST(GemmPanelsF32Group, GivesEachMemberItsOwnBits) {
  for (int in : {70, 576})
    for (int n : {1, 7})
      for (int threads : {1, 2, 3}) {
        SCOPED_TRACE("in " + std::to_string(in) + ", " + std::to_string(n) + " rows, " + std::to_string(threads) + " threads");
        ThreadPool pool(threads);
        Rng rng(static_cast<std::uint64_t>(in + n));
        std::vector<cpu::PackedPanelsF32> w;
        for (int out : {150, 37, 1000}) {
          std::vector<float> m(static_cast<std::size_t>(out) * in);  // [out, in]
          for (float& v : m) v = static_cast<float>(rng.normal());
          w.push_back(cpu::pack_panels_f32(m.data(), out, in));
        }
        std::vector<float> x(static_cast<std::size_t>(n) * in);  // [n, in]
        for (float& v : x) v = static_cast<float>(rng.normal());
        // n > 1: packing x may be a dispatch of its own
        expect_group_bits<cpu::GemmPanelsF32Output>(
            w, n, pool, n > 1 ? 2 : 1, [&](const cpu::PackedPanelsF32& m, float* y) { cpu::gemm_panels_f32(x.data(), m, y, n, pool); },
            [&](auto group) { cpu::gemm_panels_f32_group(x.data(), group, n, pool); });
      }
}

}  // namespace
}  // namespace inferlab
