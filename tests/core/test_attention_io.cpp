// The instrumented attention of FlashAttention's IO analysis (core/src/repro/attention_io.cpp): both
// algorithms compute the attention kernels/ref computes while being counted, the counts match
// hand arithmetic of Algorithms 0 and 1, and the fitted exponents are those of Theorem 2.
#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "inferlab/repro/attention_io.h"
#include "inferlab/error.h"
#include "kernels/ref/attention.h"

namespace inferlab {
namespace {

struct Inputs {
  std::vector<float> q, k, v;  // [n, d] each
};

Inputs random_inputs(int n, int d, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uni(-2.0f, 2.0f);
  Inputs in;
  for (auto* x : {&in.q, &in.k, &in.v}) {
    x->resize(static_cast<std::size_t>(n) * d);
    for (float& e : *x) e = uni(rng);
  }
  return in;
}

// Non-causal attention of n query rows over n keys by kernels/ref: n one-row sequences that
// each see the whole context (one block of n slots, shared by every sequence).
std::vector<float> reference(const Inputs& in, int n, int d) {
  std::vector<int> query_start(static_cast<std::size_t>(n) + 1), context(static_cast<std::size_t>(n), n),
      table(static_cast<std::size_t>(n), 0);
  for (int s = 0; s <= n; ++s) query_start[static_cast<std::size_t>(s)] = s;
  AttentionBatch batch;
  batch.query_start = query_start;
  batch.context_len = context;
  batch.block_table = table;
  batch.max_blocks = 1;
  batch.n_heads = batch.n_kv_heads = 1;
  batch.head_dim = d;
  batch.scale = 1.0f / std::sqrt(static_cast<float>(d));
  KvLayerView kv;
  kv.k = in.k.data();
  kv.v = in.v.data();
  kv.num_blocks = 1;
  kv.block_size = n;
  kv.n_kv_heads = 1;
  kv.head_dim = d;
  std::vector<float> out(in.q.size());  // [n, d]
  ref::ref_paged_attention(batch, kv, in.q.data(), out.data());
  return out;
}

void expect_matches_reference(AttentionIoAlgorithm algorithm, int n, int d, std::size_t m) {
  const Inputs in = random_inputs(n, d, static_cast<unsigned>(n * 131 + d));
  std::vector<float> out(in.q.size(), std::nanf(""));  // [n, d]
  attention_io_run(algorithm, n, d, m, in.q, in.k, in.v, out);
  const std::vector<float> want = reference(in, n, d);
  for (std::size_t i = 0; i < out.size(); ++i) {
    ASSERT_FALSE(std::isnan(out[i])) << "element " << i;
    ASSERT_NEAR(out[i], want[i], 2e-5f * (1.0f + std::abs(want[i]))) << "element " << i << " (N " << n << ", d " << d << ", M " << m << ")";
  }
}

TEST(AttentionIo, TiledAndStandardComputeTheReferenceAttention) {
  // Awkward shapes: N not a multiple of the tiles, one row, d not a power of two.
  for (auto algorithm : {AttentionIoAlgorithm::kStandard, AttentionIoAlgorithm::kFlash}) {
    expect_matches_reference(algorithm, 1, 8, 64);
    expect_matches_reference(algorithm, 37, 8, 100);   // Bc 4, Br 4
    expect_matches_reference(algorithm, 129, 16, 1000);  // Bc 16, Br 16
    expect_matches_reference(algorithm, 64, 24, 200);    // Bc 3 (M / 4d rounded up), Br 3
  }
}

TEST(AttentionIo, FlashTilesFollowAlgorithmOne) {
  EXPECT_EQ(flash_tiles(1024, 16).bc, 16);
  EXPECT_EQ(flash_tiles(1024, 16).br, 16);
  EXPECT_EQ(flash_tiles(1000, 64).bc, 4);  // ⌈1000 / 256⌉
  EXPECT_EQ(flash_tiles(1000, 64).br, 4);
  EXPECT_EQ(flash_tiles(16384, 32).bc, 128);
  EXPECT_EQ(flash_tiles(16384, 32).br, 32);  // min(Bc, d)
}

TEST(AttentionIo, CountsAreThoseOfTheAlgorithmsByHand) {
  const int n = 64, d = 16;
  const Inputs in = random_inputs(n, d, 1);
  std::vector<float> out(in.q.size());
  // Algorithm 1, M = 1024: Bc = Br = 16, Tc = Tr = 4. Reads: K and V once (2Nd), and per key
  // block every Q_i, O_i (2Nd) and ℓ_i, m_i (2N). Writes: O, ℓ, m initialised (N(d + 2)), then
  // written back per key block (Tc · N(d + 2)).
  const AttentionIoCount flash = attention_io_run(AttentionIoAlgorithm::kFlash, n, d, 1024, in.q, in.k, in.v, out);
  EXPECT_EQ(flash.hbm_reads, 2.0 * n * d + 4.0 * (2.0 * n * d + 2.0 * n));
  EXPECT_EQ(flash.hbm_writes, 5.0 * n * (d + 2));
  // K_j, V_j, Q_i, O_i [16, 16] each, ℓ_i, m_i [16], S_ij [16, 16], one row of P̃V [16].
  EXPECT_EQ(flash.sram_peak, 4u * 256 + 2 * 16 + 256 + 16);
  // Algorithm 0, M = 768: square tiles of ⌊√256⌋ = 16. S = QKᵀ: 16 output tiles each reading a
  // 16×16 block of Q and of K (8192), writing S (N²). Softmax: S read twice (max/sum, then
  // normalise), P written. O = PV: 4 output tiles × 4 chunks × (16×16 of P + 16×16 of V), O written.
  const AttentionIoCount standard = attention_io_run(AttentionIoAlgorithm::kStandard, n, d, 768, in.q, in.k, in.v, out);
  EXPECT_EQ(standard.hbm_reads, 8192.0 + 2.0 * n * n + 8192.0);
  EXPECT_EQ(standard.hbm_writes, 2.0 * n * n + n * d);
  EXPECT_LE(standard.sram_peak, 768u);
}

TEST(AttentionIo, FlashMovesFewerElementsThanStandardOnceMIsLarge) {
  const int n = 256, d = 32;
  const Inputs in = random_inputs(n, d, 2);
  std::vector<float> out(in.q.size());
  auto accesses = [&](AttentionIoAlgorithm a, std::size_t m) {
    return attention_io_run(a, n, d, m, in.q, in.k, in.v, out).hbm_accesses();
  };
  // Doubling M halves flash's key-block loop (Θ(N²d²/M)); standard's N² terms do not move.
  const double f1 = accesses(AttentionIoAlgorithm::kFlash, 2048), f2 = accesses(AttentionIoAlgorithm::kFlash, 4096);
  EXPECT_NEAR(f1 / f2, 2.0, 0.15);
  EXPECT_LT(f2, accesses(AttentionIoAlgorithm::kStandard, 4096));
}

TEST(AttentionIo, FittedExponentsAreTheoremTwos) {
  const AttentionIoGrid grid{128, 1024, 32, 128, 2048, 8192};  // experiments/repro/flash_attention_io.toml's
  const AttentionIoFit flash = fit_attention_io(AttentionIoAlgorithm::kFlash, grid);
  EXPECT_NEAR(flash.exp_n, 2.0, 0.1);
  EXPECT_NEAR(flash.exp_d, 2.0, 0.1);
  EXPECT_NEAR(flash.exp_m, -1.0, 0.1);
  EXPECT_NEAR(flash.bound_slope, 1.0, 0.1);
  const AttentionIoFit standard = fit_attention_io(AttentionIoAlgorithm::kStandard, grid);
  EXPECT_NEAR(standard.bound_slope, 1.0, 0.1);
  EXPECT_NEAR(standard.exp_n, 2.0, 0.1);
  // Θ(Nd + N²) hides a constant that moves with d/√M (the tiled S = QKᵀ reads Q and K N/√M
  // times): M's exponent is small and negative, nowhere near flash's −1.
  EXPECT_LT(standard.exp_m, 0.0);
  EXPECT_GT(standard.exp_m, -0.5);
}

TEST(AttentionIo, BadInputsAreErrors) {
  const Inputs in = random_inputs(8, 16, 3);
  std::vector<float> out(in.q.size());
  EXPECT_THROW(attention_io_run(AttentionIoAlgorithm::kFlash, 8, 16, 8, in.q, in.k, in.v, out), Error);  // M < d
  std::vector<float> short_out(3);
  EXPECT_THROW(attention_io_run(AttentionIoAlgorithm::kFlash, 8, 16, 64, in.q, in.k, in.v, short_out), Error);
  EXPECT_THROW(parse_attention_io_algorithm("tiled", "x.toml"), Error);
  EXPECT_THROW(fit_attention_io(AttentionIoAlgorithm::kFlash, {64, 64, 16, 16, 1024, 1024}), Error);  // one point
}

}  // namespace
}  // namespace inferlab
