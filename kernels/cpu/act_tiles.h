// Int8 activation rows packed for the VNNI micro-tiles of gemm_panels_int8 and gemm_gguf: the
// token rows in tiles of kTileRows (the last tile padded with zero rows), each tile's codes
// interleaved [steps][kTileRows][4] (a step: 4 consecutive inputs, vpdpbusd's broadcast
// operand), zero past `in`. A micro-tile's broadcasts then walk one pointer at compile-time
// offsets: six row pointers, the scales' and the loop's would not fit the 15 integer registers
// (GCC spilled them, and with them the fp32 sums). Beside the codes, per tile and scale block,
// the rows' block scales and the sums of their codes in the block (what an unsigned weight
// operand's offset adds: 128 Σx for codes held as c + 128), their products xs Σx (what the
// tiles' mins and Q4_1 offsets scale: a broadcast load instead of a conversion and a multiply
// per tile), and on request the sums of each half block (Q6_K's 16-input sub-blocks). One row
// alone (decode) is not interleaved: its codes are read as they are (copied only to pad `in` to
// a multiple of 4), so a decode step pays no transpose; step_bytes tells the micro-tiles which
// layout they read.
//
// Made once per call (per group of matrices that read the same activations), on the pool's
// threads when the rows are many; the buffers are the calling thread's (thread_local), valid
// until its next pack_act_tiles.
#pragma once
#include <cstdint>

#include "inferlab/thread_pool.h"

namespace inferlab::cpu {

constexpr int kTileRows = 6;  // token rows per micro-tile
constexpr int kTileStepBytes = kTileRows * 4;  // ActTiles::step_bytes of a tile of rows
constexpr int kRowStepBytes = 4;                // ActTiles::step_bytes of one row alone (n = 1)

struct ActTiles {
  const std::int8_t* x;   // [tiles][steps][kTileRows][4]; one row: [steps][4]
  const float* xs;        // [tiles][blocks][kTileRows]: the rows' block scales
  const int* sum;         // [tiles][blocks][kTileRows]: Σ of the block's codes
  const float* xsum;      // [tiles][blocks][kTileRows]: xs Σ (what an offset or a min scales)
  const int* half_sum;    // [tiles][blocks][2][kTileRows] (null unless asked for)
  int steps, blocks, block_steps;  // steps per row (in rounded up to 4, / 4); blocks of block_steps steps
  int step_bytes;  // from one step of a tile to the next: kTileStepBytes, or kRowStepBytes for one row

  const std::int8_t* tile_x(int t) const { return x + static_cast<std::size_t>(t) * steps * step_bytes; }
  std::size_t tile_blocks(int t) const { return static_cast<std::size_t>(t) * blocks * kTileRows; }
};

// Packs xq [n][in] with xs [n][ceil(in / block)] (block: a positive multiple of 4; the last
// block may be short). half_sums: also the sums of each half block (block must then be a
// multiple of 8). n <= 0 packs nothing; any other block throws inferlab::Error.
ActTiles pack_act_tiles(const std::int8_t* xq, const float* xs, int n, int in, int block, bool half_sums,
                        ThreadPool& pool);

}  // namespace inferlab::cpu
