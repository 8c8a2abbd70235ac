// The int8 activation tiles of the VNNI GEMMs (kernels/cpu/act_tiles.h): every code, scale and
// sum where the layout says, against a plain reading of the rows — over row counts around the
// 6-row tile, lengths around the 16-step transpose and the 4-input step, blocks of 32 and of a
// whole row, half sums, the single-row (decode) layout, and a pool that splits the tiles.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "inferlab/error.h"
#include "inferlab/support/rng.h"
#include "inferlab/thread_pool.h"
#include "kernels/cpu/act_tiles.h"

namespace inferlab {
namespace {

int plain_sum(const std::vector<std::int8_t>& x, int row, int in, int from, int to) {
  int s = 0;
  for (int k = from; k < std::min(to, in); ++k) s += x[static_cast<std::size_t>(row) * in + k];
  return s;
}

void check_tiles(int n, int in, int block, bool halves, ThreadPool& pool) {
  SCOPED_TRACE("n " + std::to_string(n) + " in " + std::to_string(in) + " block " + std::to_string(block) +
               (halves ? " halves" : ""));
  Rng rng(static_cast<std::uint64_t>(n * 7919 + in * 31 + block));
  const int blocks = (in + block - 1) / block, steps = (in + 3) / 4;
  std::vector<std::int8_t> xq(static_cast<std::size_t>(n) * in);
  std::vector<float> xs(static_cast<std::size_t>(n) * blocks);
  for (auto& v : xq) v = static_cast<std::int8_t>(rng.uniform_int(-127, 128));
  for (auto& v : xs) v = static_cast<float>(rng.uniform()) + 0.5f;
  const cpu::ActTiles a = cpu::pack_act_tiles(xq.data(), xs.data(), n, in, block, halves, pool);
  ASSERT_EQ(a.steps, steps);
  ASSERT_EQ(a.blocks, blocks);
  ASSERT_EQ(a.block_steps, block / 4);
  ASSERT_EQ(a.step_bytes, n == 1 ? 4 : cpu::kTileStepBytes);
  ASSERT_EQ(a.half_sum != nullptr, halves);
  const int tiles = (n + cpu::kTileRows - 1) / cpu::kTileRows;
  for (int t = 0; t < tiles; ++t) {
    const std::int8_t* tx = a.tile_x(t);
    const int rows = n == 1 ? 1 : cpu::kTileRows;  // a single row's tile holds that row only
    for (int r = 0; r < rows; ++r) {
      const int row = t * cpu::kTileRows + r;
      for (int s = 0; s < steps; ++s)
        for (int i = 0; i < 4; ++i) {
          const int k = 4 * s + i;
          const std::int8_t want = row < n && k < in ? xq[static_cast<std::size_t>(row) * in + k] : 0;
          ASSERT_EQ(tx[static_cast<std::size_t>(s) * a.step_bytes + 4 * r + i], want) << "row " << row << " input " << k;
        }
      for (int b = 0; b < blocks; ++b) {
        const std::size_t at = a.tile_blocks(t) + static_cast<std::size_t>(b) * cpu::kTileRows + r;
        const float want_xs = row < n ? xs[static_cast<std::size_t>(row) * blocks + b] : 0.0f;
        const int want_sum = row < n ? plain_sum(xq, row, in, b * block, (b + 1) * block) : 0;
        ASSERT_EQ(a.xs[at], want_xs) << "row " << row << " block " << b;
        ASSERT_EQ(a.sum[at], want_sum) << "row " << row << " block " << b;
        if (halves)
          for (int h = 0; h < 2; ++h) {
            const int from = b * block + h * block / 2;
            const int want_half = row < n ? plain_sum(xq, row, in, from, from + block / 2) : 0;
            ASSERT_EQ(a.half_sum[2 * (a.tile_blocks(t) + static_cast<std::size_t>(b) * cpu::kTileRows) +
                                 static_cast<std::size_t>(h) * cpu::kTileRows + r],
                      want_half)
                << "row " << row << " block " << b << " half " << h;
          }
      }
    }
  }
}

TEST(ActTiles, LayoutScalesAndSumsMatchThePlainRows) {
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    for (int n : {1, 2, 5, 6, 7, 13, 64})
      for (int in : {4, 30, 32, 64, 68, 96, 260, 576}) {
        check_tiles(n, in, 32, false, pool);
        check_tiles(n, in, 32, true, pool);
        check_tiles(n, in, (in + 3) / 4 * 4, false, pool);  // per-token: one block per row
      }
  }
}

// A later, smaller call reuses the thread's buffers: what it reads is its own rows, with the
// padding rows zero again (not the earlier call's codes).
TEST(ActTiles, ReusedBuffersHoldOnlyTheLatestCall) {
  ThreadPool pool(2);
  check_tiles(64, 576, 32, true, pool);
  check_tiles(7, 96, 32, false, pool);
  check_tiles(1, 30, 32, false, pool);
  check_tiles(13, 68, 32, true, pool);
}

TEST(ActTiles, RejectsBlocksTheLayoutCannotHold) {
  ThreadPool pool(1);
  const std::vector<std::int8_t> xq(64, 1);
  const std::vector<float> xs(64, 1.0f);
  EXPECT_THROW(cpu::pack_act_tiles(xq.data(), xs.data(), 2, 32, 0, false, pool), Error);
  EXPECT_THROW(cpu::pack_act_tiles(xq.data(), xs.data(), 2, 32, 6, false, pool), Error);
  EXPECT_THROW(cpu::pack_act_tiles(xq.data(), xs.data(), 2, 32, 12, true, pool), Error);
}

}  // namespace
}  // namespace inferlab
