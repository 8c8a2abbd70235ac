// AMX int8 prefill over scale blocks of 32: see amx_blocks.h.
#include "kernels/cpu/amx_blocks.h"

#if INFERLAB_AMX_INT8
#include <cstring>

namespace inferlab::cpu::amx_blocks {

void make_tokens(const ActTiles& a, const std::int8_t* xq, int n, int in, Tokens& k, ThreadPool& pool) {
  k.n = n;
  k.blocks = in / kBlock;
  k.tiles = (n + kRows - 1) / kRows;
  const std::size_t slots = static_cast<std::size_t>(k.tiles) * k.blocks * kRows;
  k.x.assign(slots * kBlock, 0);
  k.xs.assign(slots, 0.0f);
  k.xsum.assign(slots, 0.0f);
  // Token rows split across the pool (n x in bytes copied: on the caller alone it idled the
  // other threads).
  pool.parallel_for(static_cast<std::size_t>(n), [&](std::size_t begin, std::size_t end) {
    for (auto tok = static_cast<int>(begin); tok < static_cast<int>(end); ++tok) {
      const int t = tok / kRows, r = tok % kRows;
      for (int b = 0; b < k.blocks; ++b) {
        const std::size_t src = a.tile_blocks(tok / kTileRows) + static_cast<std::size_t>(b) * kTileRows + tok % kTileRows;
        const std::size_t dst = (static_cast<std::size_t>(t) * k.blocks + b) * kRows + r;
        std::memcpy(k.x.data() + dst * kBlock, xq + static_cast<std::size_t>(tok) * in + static_cast<std::size_t>(b) * kBlock, kBlock);
        k.xs[dst] = a.xs[src];
        k.xsum[dst] = a.xsum[src];  // the VNNI tiles' product
      }
    }
  }, 16);
}

const AmxConfig& config() {
  static const AmxConfig c =
      AmxConfig{}.tile(0, kRows, 64).tile(1, kRows, 64).tile(2, kRows, kBlock).tile(4, kRows, kBlock).tile(3, kBlock / 4, 64).tile(5, kBlock / 4, 64);
  return c;
}

}  // namespace inferlab::cpu::amx_blocks
#endif
