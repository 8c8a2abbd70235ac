// Flash attention against the double-precision reference (kernels/ref/attention) and against
// naive attention, over awkward shapes: 1, 3, 129 query rows, partial blocks, block sizes
// 1/3/16, tiles that do and do not divide blocks, GQA, mixed prefill/decode/verify batches,
// shuffled block tables. Loads nothing from the registry.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "attention_checks.h"
#include "flash_attention.h"
#include "flash_tile_kernels.h"
#include "inferlab/error.h"
#include "inferlab/plugin/registry.h"
#include "test_support.h"

namespace inferlab::testing {
namespace {

namespace flash = plugins::flash;

constexpr double kTolerance = 1e-5;
// Scores reach ~150 in the peaked test; a float score carries an absolute error of about
// |score| * 1e-7 * (summation length), and exp turns it into the same relative weight error,
// so no float kernel meets 1e-5 there. That test is about overflow, not precision.
constexpr double kPeakedTolerance = 1e-4;

// (block_size, heads, tile, query_rows)
class FlashAttentionShapes
    : public ::testing::TestWithParam<std::tuple<int, Heads, int, int>> {
 protected:
  AttentionProblemSpec spec(std::vector<SeqShape> seqs, std::uint64_t seed) const {
    return problem_spec(std::move(seqs), std::get<0>(GetParam()), std::get<1>(GetParam()), seed);
  }
  void expect_matches_reference(const AttentionProblemSpec& s) const {
    plugins::FlashAttention flash(std::get<2>(GetParam()), std::get<3>(GetParam()));
    expect_attention_matches_reference(flash, s, kTolerance);
  }
};

TEST_P(FlashAttentionShapes, SingleDecodeRow) {
  expect_matches_reference(spec({{1, 1}}, 1));
  expect_matches_reference(spec({{37, 1}}, 2));
}

TEST_P(FlashAttentionShapes, ThreeRowChunkAndWholePrefill) {
  expect_matches_reference(spec({{3, 3}}, 3));
  expect_matches_reference(spec({{129, 129}}, 4));
}

TEST_P(FlashAttentionShapes, MixedPrefillDecodeAndVerifyBatch) {
  expect_matches_reference(spec(mixed_step_shapes(), 5));
}

INSTANTIATE_TEST_SUITE_P(
    BlocksGqaTiles, FlashAttentionShapes,
    ::testing::Combine(::testing::Values(1, 3, 16), ::testing::Values(Heads{8, 2}, Heads{9, 3}),
                       ::testing::Values(1, 7, 64), ::testing::Values(3, 16)),
    [](const auto& info) {
      const Heads h = std::get<1>(info.param);
      return "bs" + std::to_string(std::get<0>(info.param)) + "_h" + std::to_string(h.n_heads) +
             "_kv" + std::to_string(h.n_kv_heads) + "_tile" +
             std::to_string(std::get<2>(info.param)) + "_qr" +
             std::to_string(std::get<3>(info.param));
    });

// The register-blocked path: head_dim 20/40 (a d % 16 tail), 48 (3 Vec16s), 64, 80 (4 + 1 Vec16s
// in two P·V passes), 128 (two full passes); GQA groups 1/3/4/8, so blocks of kBlockVectors
// vectors split rows; row counts 1, 2, 7, 13 and 64 leave partial blocks; contexts longer than
// the rows (a prefix already cached) put the causal diagonal inside a tile.
// (head_dim, group, tile, query_rows)
class FlashRegisterBlocks : public ::testing::TestWithParam<std::tuple<int, int, int, int>> {};

TEST_P(FlashRegisterBlocks, MatchesReference) {
  const auto [head_dim, group, tile, query_rows] = GetParam();
  AttentionProblemSpec s;
  s.seqs = {{40, 7}, {100, 13}, {64, 64}, {17, 1}, {90, 2}, {150, 37}};
  s.head_dim = head_dim;
  s.n_kv_heads = 2;
  s.n_heads = 2 * group;
  s.block_size = 16;
  s.seed = static_cast<std::uint64_t>(head_dim * 100 + group);
  plugins::FlashAttention flash(tile, query_rows);
  expect_attention_matches_reference(flash, s, kTolerance);
}

INSTANTIATE_TEST_SUITE_P(
    HeadDimGroupTile, FlashRegisterBlocks,
    ::testing::Combine(::testing::Values(20, 40, 48, 64, 80, 128), ::testing::Values(1, 3, 4, 8),
                       ::testing::Values(7, 64), ::testing::Values(5, 16)),
    [](const auto& info) {
      return "d" + std::to_string(std::get<0>(info.param)) + "_g" + std::to_string(std::get<1>(info.param)) +
             "_tile" + std::to_string(std::get<2>(info.param)) + "_qr" + std::to_string(std::get<3>(info.param));
    });

// The micro-kernels alone against plain loops, for every block shape (1..kBlockVectors vectors,
// widths that end mid-Vec16 and span several kernel calls) and a d % 16 tail.
TEST(FlashTileKernels, ScoresAndPvMatchPlainLoops) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal;
  constexpr int kStride = 2 * flash::kBlockColumns;
  for (int d : {16, 37, 64, 80})
    for (int mv = 1; mv <= flash::kBlockVectors; ++mv)
      for (int n : {1, 15, 16, 33, kStride - 1, kStride}) {
        SCOPED_TRACE("d " + std::to_string(d) + " mv " + std::to_string(mv) + " n " + std::to_string(n));
        std::vector<float> qs(static_cast<std::size_t>(mv) * d), k_t(static_cast<std::size_t>(d) * kStride);
        std::vector<float> v(static_cast<std::size_t>(n) * d), acc(static_cast<std::size_t>(mv) * d);
        for (auto* x : {&qs, &k_t, &v, &acc})
          for (float& e : *x) e = normal(rng);
        std::vector<const float*> v_rows;
        for (int j = 0; j < n; ++j) v_rows.push_back(v.data() + static_cast<std::size_t>(j) * d);
        std::vector<float> s(static_cast<std::size_t>(mv) * kStride);
        flash::block_scores(qs.data(), mv, d, k_t.data(), kStride, n, s.data(), kStride);
        for (int i = 0; i < mv; ++i)
          for (int j = 0; j < n; ++j) {
            double want = 0;
            for (int c = 0; c < d; ++c) want += double{qs[i * d + c]} * k_t[c * kStride + j];
            EXPECT_NEAR(s[i * kStride + j], want, 1e-4 * d);
          }
        const float alpha[] = {0.5f, 1.0f, 0.0f, 2.0f, 0.25f, 1.5f, 3.0f, 0.75f};
        std::vector<float> got = acc;
        flash::block_pv(s.data(), mv, kStride, v_rows.data(), n, alpha, got.data(), d);
        for (int i = 0; i < mv; ++i)
          for (int c = 0; c < d; ++c) {
            double want = double{alpha[i]} * acc[i * d + c];
            for (int j = 0; j < n; ++j) want += double{s[i * kStride + j]} * v[j * d + c];
            EXPECT_NEAR(got[i * d + c], want, 1e-4 * d * n);
          }
      }
}

// Decode's scores: 16 positions folded by lane_sums16 (lane j must hold row j's dot product, in
// order), short last blocks zero-filled up to the next multiple of 16, and a d % 16 tail.
TEST(FlashTileKernels, DecodeDotScoresMatchPlainLoops) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal;
  for (int d : {16, 20, 64, 80})
    for (int n : {1, 7, 16, 17, 45, 64}) {
      std::vector<float> q(static_cast<std::size_t>(d)), k(static_cast<std::size_t>(n) * d);
      for (float& e : q) e = normal(rng);
      for (float& e : k) e = normal(rng);
      std::vector<const float*> rows;
      for (int j = n - 1; j >= 0; --j) rows.push_back(k.data() + static_cast<std::size_t>(j) * d);  // any order
      const int padded = (n + flash::kLanes - 1) / flash::kLanes * flash::kLanes;
      std::vector<float> s(static_cast<std::size_t>(padded), 7.0f);
      flash::dot_scores16(q.data(), d, rows.data(), n, s.data());
      for (int j = 0; j < padded; ++j) {
        double want = 0;
        for (int c = 0; j < n && c < d; ++c) want += double{q[c]} * rows[j][c];
        EXPECT_NEAR(s[j], want, 1e-4 * d) << "d " << d << " n " << n << " j " << j;
      }
    }
}

// A group smaller than the lanes spends them on channels (lane_channels: SmolLM2's 3 vectors of
// 64 take 2 channels a lane group on AVX2, one vector all 8): the scores of every vector of the
// group against plain loops, for groups 1..lanes and head_dims that L does and does not divide.
TEST(FlashTileKernels, LaneScoresSpreadChannelsOverSpareLanes) {
  constexpr int kL = flash::kNativeLanes;
  EXPECT_EQ(flash::lane_channels(kL, 64), 1);
  EXPECT_EQ(flash::lane_channels(kL / 2, 64), 2);
  EXPECT_EQ(flash::lane_channels(3, 64), kL / 4);
  EXPECT_EQ(flash::lane_channels(1, 64), kL);
  EXPECT_EQ(flash::lane_channels(1, 6), 2);  // d = 6: pairs at most
  EXPECT_EQ(flash::lane_channels(1, 5), 1);
  std::mt19937 rng(12);
  std::normal_distribution<float> normal;
  for (int group : {1, 2, 3, 4, 5, kL})
    for (int d : {5, 6, 16, 20, 64})
      for (int n : {1, 9, 30}) {
        const int l = flash::lane_channels(group, d);
        SCOPED_TRACE("group " + std::to_string(group) + " d " + std::to_string(d) + " n " + std::to_string(n) + " L " +
                     std::to_string(l));
        ASSERT_LE(group * l, kL);
        ASSERT_EQ(d % l, 0);
        std::vector<float> qs(static_cast<std::size_t>(group) * d), k(static_cast<std::size_t>(n) * d);
        for (float& e : qs) e = normal(rng);
        for (float& e : k) e = normal(rng);
        std::vector<float> qt(static_cast<std::size_t>(d) * kL, std::nanf(""));
        flash::lane_queries(qs.data(), group, d, l, qt.data());
        std::vector<const float*> rows;
        for (int j = 0; j < n; ++j) rows.push_back(k.data() + static_cast<std::size_t>(j) * d);
        const int padded = (n + flash::kLanePositions - 1) / flash::kLanePositions * flash::kLanePositions;
        std::vector<float> st(static_cast<std::size_t>(padded) * kL);
        flash::lane_scores(qt.data(), d, rows.data(), n, st.data(), l);
        for (int j = 0; j < n; ++j)
          for (int v = 0; v < group; ++v) {
            double want = 0;
            for (int c = 0; c < d; ++c) want += double{qs[static_cast<std::size_t>(v) * d + c]} * rows[j][c];
            ASSERT_NEAR(st[static_cast<std::size_t>(j) * kL + v], want, 1e-4 * d) << "j " << j << " v " << v;
          }
        for (float e : st) ASSERT_TRUE(std::isfinite(e));
      }
}

// The lane kernels (one row's GQA group, a vector per lane): scores against K rows read in place
// (lane v of position j = q_v . k_j, positions past n not required), then one online-softmax
// step per lane over two tiles, then P·V with p read as [position][lane], against plain loops.
TEST(FlashTileKernels, LaneKernelsMatchPlainLoops) {
  constexpr int kL = flash::kNativeLanes;
  std::mt19937 rng(9);
  std::normal_distribution<float> normal;
  for (int d : {5, 16, 20, 64})
    for (int n : {1, 7, 8, 9, 30}) {
      SCOPED_TRACE("d " + std::to_string(d) + " n " + std::to_string(n));
      std::vector<float> qt(static_cast<std::size_t>(d) * kL), k(static_cast<std::size_t>(n) * d);
      for (float& e : qt) e = normal(rng);
      for (float& e : k) e = normal(rng);
      std::vector<const float*> rows;
      for (int j = n - 1; j >= 0; --j) rows.push_back(k.data() + static_cast<std::size_t>(j) * d);  // any order
      const int padded = (n + flash::kLanePositions - 1) / flash::kLanePositions * flash::kLanePositions;
      std::vector<float> st(static_cast<std::size_t>(padded) * kL);
      flash::lane_scores(qt.data(), d, rows.data(), n, st.data());
      for (int j = 0; j < n; ++j)
        for (int v = 0; v < kL; ++v) {
          double want = 0;
          for (int c = 0; c < d; ++c) want += double{qt[static_cast<std::size_t>(c) * kL + v]} * rows[j][c];
          EXPECT_NEAR(st[static_cast<std::size_t>(j) * kL + v], want, 1e-4 * d) << "j " << j << " v " << v;
        }
      // Softmax: a first tile from the empty state (alpha ~0), then this tile again shifted by
      // +1 for even lanes (a new max: alpha e^-1) and -1 for odd ones (no new max: alpha 1).
      std::vector<float> max(kL, -INFINITY), denom(kL, 0.0f), alpha(kL);
      std::vector<float> p = st;
      flash::lane_softmax_step(p.data(), n, max.data(), denom.data(), alpha.data());
      std::vector<float> p2 = st;
      for (int j = 0; j < n; ++j)
        for (int v = 0; v < kL; ++v) p2[static_cast<std::size_t>(j) * kL + v] += v % 2 == 0 ? 1.0f : -1.0f;
      const std::vector<float> max1 = max, denom1 = denom;
      flash::lane_softmax_step(p2.data(), n, max.data(), denom.data(), alpha.data());
      for (int v = 0; v < kL; ++v) {
        float m = -INFINITY;
        for (int j = 0; j < n; ++j) m = std::max(m, st[static_cast<std::size_t>(j) * kL + v]);
        double sum = 0;
        for (int j = 0; j < n; ++j) {
          const double e = std::exp(double{st[static_cast<std::size_t>(j) * kL + v]} - m);
          sum += e;
          EXPECT_NEAR(p[static_cast<std::size_t>(j) * kL + v], e, 1e-6) << "j " << j << " v " << v;
        }
        EXPECT_FLOAT_EQ(max1[static_cast<std::size_t>(v)], m);
        EXPECT_NEAR(denom1[static_cast<std::size_t>(v)], sum, 1e-5 * sum);
        const double shift = v % 2 == 0 ? 1.0 : -1.0, a = v % 2 == 0 ? std::exp(-1.0) : 1.0;
        EXPECT_NEAR(alpha[static_cast<std::size_t>(v)], a, 1e-6) << v;
        EXPECT_FLOAT_EQ(max[static_cast<std::size_t>(v)], v % 2 == 0 ? m + 1.0f : m);
        const double new_max = v % 2 == 0 ? m + 1.0 : m;
        double sum2 = 0;
        for (int j = 0; j < n; ++j) sum2 += std::exp(double{st[static_cast<std::size_t>(j) * kL + v]} + shift - new_max);
        EXPECT_NEAR(denom[static_cast<std::size_t>(v)], sum * a + sum2, 1e-5 * (sum * a + sum2)) << v;
      }
      // P·V with p[v][j] = p2[j][v]: the block kernels' stride arguments swapped.
      std::vector<float> vals(static_cast<std::size_t>(n) * d), acc(static_cast<std::size_t>(kL) * d);
      for (float& e : vals) e = normal(rng);
      for (float& e : acc) e = normal(rng);
      std::vector<const float*> v_rows;
      for (int j = 0; j < n; ++j) v_rows.push_back(vals.data() + static_cast<std::size_t>(j) * d);
      std::vector<float> got = acc;
      for (int v0 = 0; v0 < kL; v0 += flash::kBlockVectors) {
        const int mv = std::min(flash::kBlockVectors, kL - v0);
        flash::block_pv(p2.data() + v0, mv, 1, v_rows.data(), n, alpha.data() + v0,
                        got.data() + static_cast<std::size_t>(v0) * d, d, kL);
      }
      for (int v = 0; v < kL; ++v)
        for (int c = 0; c < d; ++c) {
          double want = double{alpha[static_cast<std::size_t>(v)]} * acc[static_cast<std::size_t>(v) * d + c];
          for (int j = 0; j < n; ++j)
            want += double{p2[static_cast<std::size_t>(j) * kL + v]} * vals[static_cast<std::size_t>(j) * d + c];
          EXPECT_NEAR(got[static_cast<std::size_t>(v) * d + c], want, 1e-5 * n) << "v " << v << " c " << c;
        }
    }
}

// Decode through the lane path (and with lanes = false, the paths it replaces): one row per
// sequence, GQA groups from 1 to a full machine vector (and one past it, the block path),
// contexts that end inside a score step and span tiles.
TEST(FlashAttention, LaneDecodeMatchesReference) {
  for (bool lanes : {true, false})
    for (int group : {1, 2, 5, flash::kNativeLanes, flash::kNativeLanes + 1})
      for (int tile : {7, 64}) {
        SCOPED_TRACE("lanes " + std::to_string(lanes) + " group " + std::to_string(group) + " tile " + std::to_string(tile));
        AttentionProblemSpec s;
        s.seqs = {{1, 1}, {9, 1}, {16, 1}, {301, 1}};
        s.n_kv_heads = 2;
        s.n_heads = 2 * group;
        s.head_dim = 40;
        s.block_size = 16;
        s.seed = static_cast<std::uint64_t>(group * 10 + tile);
        plugins::FlashAttention flash(tile, 16, lanes);
        expect_attention_matches_reference(flash, s, kTolerance);
      }
}

// Decode over a KV that is not f32 (f16, bf16, int8, int4): the lane path widens its rows a
// sub-tile at a time and must sum as one pass over the tile does, so its output has the bits of
// the same attention over an f32 cache holding exactly the stored values, and matches the
// reference (which reads the stored rows as that cache); tiles that are and are not multiples of
// the sub-tile, and contexts shorter than one.
TEST(FlashAttention, WidenedKvDecodeHasTheBitsOfF32HoldingItsValues) {
  for (KvDtype dtype : {KvDtype::kF16, KvDtype::kBf16, KvDtype::kInt8, KvDtype::kInt4})
    for (int tile : {7, 64}) {
      SCOPED_TRACE(std::string(kv_dtype_name(dtype)) + " tile " + std::to_string(tile));
      AttentionProblemSpec s;
      s.seqs = {{301, 1}, {40, 1}, {16, 1}, {1, 1}};
      s.n_kv_heads = 2;
      s.n_heads = 6;
      s.head_dim = 64;
      s.block_size = 16;
      s.seed = 11;
      AttentionProblemSpec f32 = s;
      s.kv_dtype = dtype;
      f32.kv_values_of = dtype;
      AttentionProblem stored(s), widened(f32);
      plugins::FlashAttention flash(tile, 16, true);
      CpuDevice device(2);
      const std::vector<float> out = run_attention(flash, stored, device);
      EXPECT_EQ(out, run_attention(flash, widened, device));
      EXPECT_LT(max_relative_error(out, reference_output(stored)), kTolerance);
      EXPECT_EQ(reference_output(stored), reference_output(widened));
    }
}

// `lanes` as a user sets it: resolved through the registry (default true), false accepted on
// the CPU and refused on CUDA, where it would change nothing.
TEST(FlashAttention, LanesParameterIsACpuSwitch) {
  Registry reg({testing::plugin_dir()});
  EXPECT_TRUE(reg.resolve(PluginKind::kAttention, "flash", {}, "test").get_bool("lanes"));
  const Params off = reg.resolve(PluginKind::kAttention, "flash", {{"lanes", false}}, "test");
  EXPECT_FALSE(off.get_bool("lanes"));
  // The plugin as the registry builds it takes the value: on a decode batch its output has the
  // bits of the class built directly with that setting, and the two settings differ (they sum
  // in different orders), so an ignored parameter fails here.
  AttentionProblemSpec spec;
  spec.seqs = {{200, 1}, {37, 1}};
  spec.n_heads = 16;
  spec.n_kv_heads = 2;
  spec.head_dim = 64;
  AttentionProblem problem(spec);
  CpuDevice device(1);
  std::vector<float> outs[2];
  for (bool lanes : {true, false}) {
    const auto made = reg.create_attention(
        "flash", reg.resolve(PluginKind::kAttention, "flash", {{"lanes", lanes}}, "test"), device);
    plugins::FlashAttention direct(plugins::FlashAttention::kDefaultTile, plugins::FlashAttention::kDefaultQueryRows, lanes);
    outs[lanes] = run_attention(*made, problem, device);
    EXPECT_EQ(outs[lanes], run_attention(direct, problem, device)) << "lanes " << lanes;
  }
  EXPECT_NE(outs[0], outs[1]);
  ModelConfig c;
  c.dim = 64;
  c.n_heads = 8;
  c.n_kv_heads = 2;
  EXPECT_TRUE(reg.check_support(PluginKind::kAttention, "flash", SupportQuery{c, DeviceKind::kCpu, KvDtype::kF32, off}).empty());
  const auto cuda = reg.check_support(PluginKind::kAttention, "flash", SupportQuery{c, DeviceKind::kCuda, KvDtype::kF32, off});
  ASSERT_FALSE(cuda.empty());  // refused on CUDA: by this parameter where CUDA is built in, else by the device
#if INFERLAB_HAVE_CUDA
  EXPECT_NE(cuda[0].find("lanes = false changes only the CPU kernels"), std::string::npos) << cuda[0];
  EXPECT_TRUE(reg.check_support(PluginKind::kAttention, "flash",
                                SupportQuery{c, DeviceKind::kCuda, KvDtype::kF32, reg.resolve(PluginKind::kAttention, "flash", {}, "t")})
                  .empty());
#endif
}

// The K tile transpose: whole 16 x 16 blocks in registers plus ragged edges in both directions.
TEST(FlashTileKernels, TransposeTileMatchesElementwise) {
  for (int n : {1, 16, 21, 64})
    for (int d : {5, 16, 40, 64}) {
      std::vector<float> k(static_cast<std::size_t>(n) * d);
      for (std::size_t i = 0; i < k.size(); ++i) k[i] = static_cast<float>(i);
      std::vector<const float*> rows;
      for (int j = 0; j < n; ++j) rows.push_back(k.data() + static_cast<std::size_t>(j) * d);
      const int stride = 80;
      std::vector<float> k_t(static_cast<std::size_t>(d) * stride, -1.0f);
      flash::transpose_tile(rows.data(), n, d, k_t.data(), stride);
      for (int c = 0; c < d; ++c)
        for (int j = 0; j < stride; ++j)
          ASSERT_EQ(k_t[c * stride + j], j < n ? k[j * d + c] : -1.0f) << "n " << n << " d " << d << " c " << c << " j " << j;
    }
}

TEST(FlashTileKernels, SoftmaxStepMasksAndRescales) {
  std::vector<float> s(2 * flash::kLanes, 9.0f);  // past the valid scores: anything
  s[0] = 1.0f, s[1] = 3.0f, s[2] = 2.0f;
  float max = 2.0f, denom = 4.0f;
  const float alpha = flash::softmax_step(s.data(), 3, flash::kLanes, max, denom);
  EXPECT_FLOAT_EQ(max, 3.0f);
  EXPECT_NEAR(alpha, std::exp(-1.0f), 1e-6);
  EXPECT_NEAR(s[0], std::exp(-2.0f), 1e-6);
  EXPECT_NEAR(s[1], 1.0f, 1e-6);
  EXPECT_NEAR(s[2], std::exp(-1.0f), 1e-6);
  for (int j = 3; j < flash::kLanes; ++j) EXPECT_EQ(s[j], 0.0f) << j;
  EXPECT_EQ(s[flash::kLanes], 9.0f);  // past the pad: untouched
  EXPECT_NEAR(denom, 4.0f * std::exp(-1.0f) + std::exp(-2.0f) + 1.0f + std::exp(-1.0f), 1e-5);
  // A vector that sees nothing of the tile: weights 0, state unchanged, alpha 1.
  EXPECT_EQ(flash::softmax_step(s.data(), 0, flash::kLanes, max, denom), 1.0f);
  EXPECT_EQ(s[0], 0.0f);
  EXPECT_FLOAT_EQ(max, 3.0f);
}

// exp_nonpositive over the range softmax feeds it, against libm, and its clamp far below.
TEST(FlashTileKernels, VectorExpMatchesLibm) {
  for (float x0 = -100.0f; x0 <= 0.0f; x0 += 0.37f) {
    flash::Vec16 x;
    for (int i = 0; i < flash::kLanes; ++i) x[i] = std::min(0.0f, x0 + 0.01f * static_cast<float>(i));
    flash::Vec16 e = x;
    flash::exp_nonpositive(e);
    for (int i = 0; i < flash::kLanes; ++i) {
      if (x[i] < -87.0f)
        EXPECT_LT(e[i], 2e-38f);
      else
        EXPECT_NEAR(e[i], std::exp(x[i]), 4e-7f * std::exp(x[i])) << x[i];
    }
  }
}

TEST(FlashAttention, AgreesWithNaiveOnLongContexts) {
  AttentionProblemSpec s;
  s.seqs = {{2000, 5}, {1500, 1}, {700, 64}, {33, 33}};
  s.n_heads = 8;
  s.n_kv_heads = 4;
  s.head_dim = 64;
  s.block_size = 16;
  AttentionProblem problem(s);
  plugins::FlashAttention flash;
  CpuDevice device(2);
  const std::vector<float> f = run_attention(flash, problem, device);
  expect_finite_and_close(f, registry_naive_output(problem, device), kTolerance);
  EXPECT_LT(max_relative_error(f, reference_output(problem)), kTolerance);
}

TEST(FlashAttention, PeakedSoftmaxRescalesWithoutOverflow) {
  // Scores in the hundreds, the max moving between tiles: exercises the running-max rescale.
  plugins::FlashAttention flash(8, 2);
  expect_peaked_softmax_close(flash, kPeakedTolerance);
}

TEST(FlashAttention, TileLargerThanContext) {
  AttentionProblemSpec s;
  s.seqs = {{10, 2}, {5, 5}};
  AttentionProblem problem(s);
  plugins::FlashAttention flash(4096, 1024);
  CpuDevice device(2);
  EXPECT_LT(max_relative_error(run_attention(flash, problem, device), reference_output(problem)),
            kTolerance);
}

TEST(FlashAttention, SameResultForAnyThreadCount) {
  plugins::FlashAttention flash(16, 4);
  expect_same_result_for_any_thread_count(flash);
}

TEST(FlashAttention, RejectsOutOfRangeParameters) {
  EXPECT_THROW(plugins::FlashAttention(0, 16), Error);
  EXPECT_THROW(plugins::FlashAttention(4097, 16), Error);
  EXPECT_THROW(plugins::FlashAttention(64, 0), Error);
  EXPECT_EQ(plugins::FlashAttention().tile(), plugins::FlashAttention::kDefaultTile);
}

TEST(FlashAttention, EmptyBatchWritesNothing) {
  plugins::FlashAttention flash;
  expect_empty_batch_writes_nothing(flash);
}

TEST(FlashAttention, RejectsShortBlockTable) {
  plugins::FlashAttention flash;
  expect_rejects_short_block_table(flash);
}

}  // namespace
}  // namespace inferlab::testing
