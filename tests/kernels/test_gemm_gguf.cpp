// kernels/cpu/gemm_gguf (the VNNI GEMM on repacked Q8_0 / Q4_0 / Q4_1 / Q4_K / Q5_K / Q6_K blocks) against the
// block reference: dequantise the file's blocks (the loader's dequantize(), the truth of each
// format) and multiply by the same quantised activations (xq * xs) in double, so only float
// rounding may differ. Shapes cover the tile edges: token rows not a multiple of the 6-row tile,
// out not a multiple of the 32-row panel (the padded last panel), odd panel counts at decode;
// the K-quants' rows are whole super-blocks of 256 (Q6_K's 4-row tile: 5 and 7 rows cross it).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "gguf_block_fixtures.h"
#include "inferlab/error.h"
#include "inferlab/formats/formats.h"
#include "inferlab/support/rng.h"
#include "inferlab/thread_pool.h"
#include "kernels/cpu/amx.h"
#include "kernels/cpu/decode_prefetch.h"
#include "kernels/cpu/gemm_gguf.h"
#include "kernels/cpu/gemm_gguf_avx2.h"
#include "kernels/cpu/matmul_int8_act.h"

namespace inferlab {
namespace {

constexpr GgmlType kPacked[] = {GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_1,
                                GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K};
bool is_k(GgmlType t) { return t == GgmlType::kQ4_K || t == GgmlType::kQ5_K || t == GgmlType::kQ6_K; }

// This build's panels for `type`: none without AVX-512 VNNI or AVX2.
#define SKIP_UNLESS_PACKED(type)                                                                         \
  if (!cpu::gemm_gguf_available() || !cpu::gemm_gguf_packs(type))                                        \
  GTEST_SKIP() << "this build packs no " << ggml_type_name(static_cast<std::uint32_t>(type))             \
               << " panels (it has neither AVX-512 VNNI nor AVX2)"

// n random normal rows of `in` inputs, quantised per 32-block as the plugin does.
struct QuantRows {
  std::vector<std::int8_t> xq;  // [n, in]
  std::vector<float> xs;        // [n, in / 32]
};
QuantRows quantized_rows(int n, int in, std::uint64_t seed, ThreadPool& pool) {
  Rng rng(seed);
  std::vector<float> x(static_cast<std::size_t>(n) * in);
  for (float& v : x) v = static_cast<float>(rng.normal());
  QuantRows q{std::vector<std::int8_t>(x.size()), std::vector<float>(static_cast<std::size_t>(n) * (in / 32))};
  cpu::quantize_act_rows(x.data(), n, in, q.xq.data(), q.xs.data(), pool);
  return q;
}

// gemm_gguf of n random rows against W [out, in] of random `type` blocks, within float rounding
// of the block reference (the dequantised weights times the same quantised activations).
void expect_matches_block_reference(GgmlType type, int out, int in, int n, std::uint64_t seed, ThreadPool& pool) {
  SCOPED_TRACE(ggml_type_name(static_cast<std::uint32_t>(type)) + " " + std::to_string(out) + "x" + std::to_string(in) +
               ", " + std::to_string(n) + " rows");
  const std::vector<std::uint8_t> blocks = testing::random_gguf_blocks(type, out, in, seed);
  std::vector<float> w(static_cast<std::size_t>(out) * in);  // [out, in]
  dequantize(type, blocks.data(), w.size(), w.data());
  Rng rng(seed + 1);
  std::vector<float> x(static_cast<std::size_t>(n) * in);  // [n, in]
  for (float& v : x) v = static_cast<float>(rng.normal());
  const int nb = in / 32;
  std::vector<std::int8_t> xq(x.size());                // [n, in]
  std::vector<float> xs(static_cast<std::size_t>(n) * nb);  // [n, in / 32]
  cpu::quantize_act_rows(x.data(), n, in, xq.data(), xs.data(), pool);

  const cpu::PackedGguf packed = cpu::pack_gguf(type, blocks, out, in);
  std::vector<float> y(static_cast<std::size_t>(n) * out, NAN);  // [n, out]
  cpu::gemm_gguf(xq.data(), xs.data(), packed, y.data(), n, pool);
  for (int r = 0; r < n; ++r)
    for (int o = 0; o < out; ++o) {
      double want = 0.0, mag = 0.0;
      for (int i = 0; i < in; ++i) {
        const std::size_t xi = static_cast<std::size_t>(r) * in + i;
        const double p = static_cast<double>(xq[xi]) * xs[static_cast<std::size_t>(r) * nb + i / 32] *
                         w[static_cast<std::size_t>(o) * in + i];
        want += p;
        mag += std::fabs(p);
      }
      ASSERT_NEAR(y[static_cast<std::size_t>(r) * out + o], want, 2e-6 * mag + 1e-12) << "row " << r << " out " << o;
    }
}

class GemmGguf : public ::testing::TestWithParam<GgmlType> {};

TEST_P(GemmGguf, MatchesBlockReferenceAtTileEdges) {
  const GgmlType type = GetParam();
  SKIP_UNLESS_PACKED(type);
  ThreadPool pool(2);
  std::uint64_t seed = 70;
  struct Shape {
    int out, in;
  };
  // The K-quants' inputs are whole super-blocks of 256.
  const std::vector<Shape> shapes =
      is_k(type) ? std::vector<Shape>{{1, 256}, {31, 512}, {33, 256}, {70, 768}, {128, 256}}
                 : std::vector<Shape>{{1, 32}, {31, 64}, {33, 96}, {70, 160}, {128, 64}};
  for (Shape s : shapes)
    for (int n : {1, 5, 6, 7, 13, 16, 19, 49}) {  // up to 13: packed panels; 16 and up: unpacked (AMX where it runs)
      seed += 2;
      expect_matches_block_reference(type, s.out, s.in, n, seed, pool);
    }
}

TEST_P(GemmGguf, FewRowsMatchBlockReferenceAtEveryRowCount) {
  // k = 1..16 rows (speculative verification, beam branches, a few sequences): decode's panel
  // pairs, the packed tiles of 1..6 rows and their tails, 3 tiles, and 16 rows (AMX where it
  // runs); out: 4 full panels (pairs at decode), one of 6 rows, on 1 and 3 threads.
  const GgmlType type = GetParam();
  SKIP_UNLESS_PACKED(type);
  ThreadPool one(1), three(3);
  const int out = 4 * 32 + 6, in = is_k(type) ? 512 : 160;
  for (int n = 1; n <= 16; ++n) {
    expect_matches_block_reference(type, out, in, n, 900 + 2 * static_cast<std::uint64_t>(n), one);
    expect_matches_block_reference(type, out, in, n, 950 + 2 * static_cast<std::uint64_t>(n), three);
  }
}

// Decode (one row: two panels at once, hoisted scales, Q6_K's halves in one pass) gives each
// row the same bits as the 6-row tiles of a batch, on the packed panels (a few tiles) and on
// the unpacked ones (4 tiles or more): a prefill row equals the same token's decode row.
TEST_P(GemmGguf, OneRowMatchesItsRowInATileBitForBit) {
  const GgmlType type = GetParam();
  SKIP_UNLESS_PACKED(type);
  ThreadPool pool(2);
  // 5 panels: a pair and a lone one at decode (and in the two-panel tiles of 2-4 rows); 7 rows: 2
  // tiles on the packed panels, 49 rows: 9 tiles on the unpacked panels.
  const int out = 130, in = is_k(type) ? 768 : 800;
  const std::vector<std::uint8_t> blocks = testing::random_gguf_blocks(type, out, in, 11);
  const cpu::PackedGguf packed = cpu::pack_gguf(type, blocks, out, in);
  for (int n : {2, 3, 4, 7, 49}) {
    SCOPED_TRACE(std::to_string(n) + " rows");
    const QuantRows q = quantized_rows(n, in, 12, pool);
    const std::vector<std::int8_t>& xq = q.xq;
    const std::vector<float>& xs = q.xs;
    std::vector<float> batch(static_cast<std::size_t>(n) * out), one(static_cast<std::size_t>(out));
    cpu::gemm_gguf(xq.data(), xs.data(), packed, batch.data(), n, pool);
    for (int r = 0; r < n; ++r) {
      cpu::gemm_gguf(xq.data() + static_cast<std::size_t>(r) * in, xs.data() + static_cast<std::size_t>(r) * (in / 32),
                     packed, one.data(), 1, pool);
      for (int o = 0; o < out; ++o)
        ASSERT_EQ(one[static_cast<std::size_t>(o)], batch[static_cast<std::size_t>(r) * out + o]) << "row " << r << " out " << o;
    }
  }
}

// Prefill with each panel unpacked first (the default) and on the packed tiles
// (set_gemm_gguf_unpack(false), what gemm_gguf_unpack's benchmark compares) gives the same bits:
// 49 rows, 9 tiles, past the unpacking threshold.
TEST_P(GemmGguf, PrefillUnpackedOrPackedGivesTheSameBits) {
  const GgmlType type = GetParam();
  SKIP_UNLESS_PACKED(type);
  ThreadPool pool(2);
  const int out = 130, in = is_k(type) ? 768 : 800, n = 49;
  const cpu::PackedGguf packed = cpu::pack_gguf(type, testing::random_gguf_blocks(type, out, in, 13), out, in);
  const QuantRows q = quantized_rows(n, in, 14, pool);
  std::vector<float> unpacked(static_cast<std::size_t>(n) * out), on_packed(unpacked.size());
  ASSERT_TRUE(cpu::gemm_gguf_unpack_enabled());
  cpu::gemm_gguf(q.xq.data(), q.xs.data(), packed, unpacked.data(), n, pool);
  EXPECT_TRUE(cpu::set_gemm_gguf_unpack(false));
  cpu::gemm_gguf(q.xq.data(), q.xs.data(), packed, on_packed.data(), n, pool);
  EXPECT_FALSE(cpu::set_gemm_gguf_unpack(true));
  for (std::size_t i = 0; i < unpacked.size(); ++i) ASSERT_EQ(unpacked[i], on_packed[i]) << "element " << i;
}

// Decode (one token row) and few-row passes with the tiles' software prefetch (the default) and
// without it (set_decode_prefetch(0), what gemm_gguf_prefetch's benchmark compares) give the
// same bits; a distance past the matrix's end (prefetches that touch nothing of it) too.
// Negative: 0.
TEST_P(GemmGguf, DecodeAndFewRowsWithOrWithoutPrefetchGiveTheSameBits) {
  const GgmlType type = GetParam();
  SKIP_UNLESS_PACKED(type);
  ThreadPool pool(2);
  const int out = 130, in = is_k(type) ? 768 : 800;
  const cpu::PackedGguf packed = cpu::pack_gguf(type, testing::random_gguf_blocks(type, out, in, 15), out, in);
  for (int n : {1, 3, 9}) {
    const QuantRows q = quantized_rows(n, in, 16, pool);
    std::vector<float> with(static_cast<std::size_t>(n) * out), without(with.size()), far(with.size());
    ASSERT_EQ(cpu::decode_prefetch_bytes(), cpu::kDecodePrefetch);
    cpu::gemm_gguf(q.xq.data(), q.xs.data(), packed, with.data(), n, pool);
    EXPECT_EQ(cpu::set_decode_prefetch(0), cpu::kDecodePrefetch);
    cpu::gemm_gguf(q.xq.data(), q.xs.data(), packed, without.data(), n, pool);
    cpu::set_decode_prefetch(1 << 24);  // clamped to kMaxDecodePrefetch, past the matrix's end
    cpu::gemm_gguf(q.xq.data(), q.xs.data(), packed, far.data(), n, pool);
    EXPECT_EQ(cpu::decode_prefetch_bytes(), cpu::kMaxDecodePrefetch);
    cpu::set_decode_prefetch(-5);
    EXPECT_EQ(cpu::decode_prefetch_bytes(), 0);
    cpu::set_decode_prefetch(cpu::kDecodePrefetch);
    for (std::size_t i = 0; i < with.size(); ++i) {
      ASSERT_EQ(with[i], without[i]) << "n " << n << " element " << i;
      ASSERT_EQ(with[i], far[i]) << "n " << n << " element " << i;
    }
  }
}

// Where AMX runs (kernels/cpu/amx.h), its tiles give every row the bits the VNNI tiles give it:
// the same int32 sums, folded into fp32 in the same order. Rows: one 16-token tile, a tile and a
// one-row tail, several tiles with a tail; 130 outputs: a last panel of 2 rows (its second half
// empty). Q6_K stays on the VNNI tiles, so for it both runs take the same path.
TEST_P(GemmGguf, AmxTilesGiveTheVnniTilesBits) {
  SKIP_UNLESS_PACKED(GetParam());
  if (!cpu::amx_int8_enabled()) GTEST_SKIP() << "AMX int8 does not run here (not built with it, not granted by the kernel, or INFERLAB_AMX=0)";
  const GgmlType type = GetParam();
  ThreadPool pool(2);
  const int out = 130, in = is_k(type) ? 768 : 800;
  const std::vector<std::uint8_t> blocks = testing::random_gguf_blocks(type, out, in, 21);
  const cpu::PackedGguf packed = cpu::pack_gguf(type, blocks, out, in);
  for (int n : {16, 17, 49, 64}) {
    SCOPED_TRACE(std::to_string(n) + " rows");
    const QuantRows q = quantized_rows(n, in, 22, pool);
    const std::vector<std::int8_t>& xq = q.xq;
    const std::vector<float>& xs = q.xs;
    std::vector<float> amx(static_cast<std::size_t>(n) * out, NAN), vnni(amx.size(), NAN);
    cpu::gemm_gguf(xq.data(), xs.data(), packed, amx.data(), n, pool);
    cpu::set_amx_int8(false);
    cpu::gemm_gguf(xq.data(), xs.data(), packed, vnni.data(), n, pool);
    cpu::set_amx_int8(true);
    for (std::size_t i = 0; i < amx.size(); ++i) ASSERT_EQ(amx[i], vnni[i]) << "row " << i / out << " out " << i % out;
  }
}

TEST_P(GemmGguf, PackingKeepsTheFileBytes) {
  const GgmlType type = GetParam();
  SKIP_UNLESS_PACKED(type);
  const int out = 45, in = is_k(type) ? 512 : 96;
  const std::vector<std::uint8_t> blocks = testing::random_gguf_blocks(type, out, in, 3);
  const cpu::PackedGguf packed = cpu::pack_gguf(type, blocks, out, in);
  const std::size_t row_bytes = ggml_tensor_bytes(type, in);
  std::vector<std::uint8_t> row(row_bytes);
  for (int o = 0; o < out; ++o) {
    cpu::unpack_gguf_row(packed, o, row.data());
    ASSERT_TRUE(std::equal(row.begin(), row.end(), blocks.begin() + static_cast<std::ptrdiff_t>(o * row_bytes))) << o;
  }
  // Two panels (out padded to 64 rows) of exactly the file's bytes: nothing stored besides
  // (Q4_K / Q5_K: their 12 bytes of packed 6-bit scales and mins held as 16, one byte each).
  const std::uint64_t padded = ggml_tensor_bytes(type, static_cast<std::uint64_t>(64) * in);
  const std::uint64_t want = type == GgmlType::kQ4_K   ? padded / 144 * 148
                             : type == GgmlType::kQ5_K ? padded / 176 * 180
                                                       : padded;
  EXPECT_EQ(cpu::packed_bytes(packed), want);
  EXPECT_THROW(cpu::unpack_gguf_row(packed, out, row.data()), Error);
}

INSTANTIATE_TEST_SUITE_P(PackedTypes, GemmGguf, ::testing::ValuesIn(kPacked),
                         [](const ::testing::TestParamInfo<GgmlType>& p) {
                           return ggml_type_name(static_cast<std::uint32_t>(p.param));
                         });

TEST(GemmGgufErrors, RefusesOtherTypesAndWrongShapes) {
  if (!cpu::gemm_gguf_available()) {
    EXPECT_THROW(cpu::pack_gguf(GgmlType::kQ8_0, std::vector<std::uint8_t>(34), 1, 32), Error);
    return;
  }
  EXPECT_TRUE(cpu::gemm_gguf_packs(GgmlType::kQ4_1));
  EXPECT_TRUE(cpu::gemm_gguf_packs(GgmlType::kQ4_K));
  EXPECT_FALSE(cpu::gemm_gguf_packs(GgmlType::kF16));
  EXPECT_THROW(cpu::pack_gguf(GgmlType::kF16, std::vector<std::uint8_t>(512), 1, 256), Error);
  EXPECT_TRUE(cpu::gemm_gguf_packs(GgmlType::kQ6_K));
  EXPECT_TRUE(cpu::gemm_gguf_packs(GgmlType::kQ5_K));
  EXPECT_THROW(cpu::pack_gguf(GgmlType::kQ5_K, std::vector<std::uint8_t>(175), 1, 256), Error);  // a byte short
  EXPECT_THROW(cpu::pack_gguf(GgmlType::kQ4_K, std::vector<std::uint8_t>(144 / 8), 1, 32), Error);  // not whole super-blocks
  EXPECT_THROW(cpu::pack_gguf(GgmlType::kQ8_0, std::vector<std::uint8_t>(34), 1, 48), Error);
  EXPECT_THROW(cpu::pack_gguf(GgmlType::kQ8_0, std::vector<std::uint8_t>(33), 1, 32), Error);
  EXPECT_THROW(cpu::pack_gguf(GgmlType::kQ4_0, std::vector<std::uint8_t>(), 0, 32), Error);
}

}  // namespace
}  // namespace inferlab
