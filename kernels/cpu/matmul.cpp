// fp32 matmul: register tiles of R token rows x C output channels (dot_tile.h), AVX-512 or
// AVX2/FMA when available (compile-time: -march=native), a scalar omp-simd loop otherwise.
// See matmul.h for the contract and the roofline.
#include "kernels/cpu/matmul.h"

#include <cstddef>

#include "kernels/cpu/dot_tile.h"

namespace inferlab::cpu {
namespace {

// The widest fp32 vector this build has, and the output channels per tile for n >= 3: a 4 x C
// tile needs 4*C + C + 1 vector registers (32 with AVX-512, 16 with AVX2).
#if defined(__AVX512F__)
using Lanes = Vec512;
constexpr int kBatchChannels = 4;
#elif defined(__AVX2__) && defined(__FMA__)
using Lanes = Vec256;
constexpr int kBatchChannels = 2;
#else
using Lanes = VecScalar;
constexpr int kBatchChannels = 2;
#endif

// Rows [0, n) x output channels [o0, o1). Output channels are the outer loop so each block of
// C weight rows is streamed from memory once and reused across all token rows, which stay in
// cache (n * in floats).
template <int C>
void run_channels(const float* x, const float* w, float* y, int n, int out, int in, int o0, int o1) {
  const std::size_t xs = static_cast<std::size_t>(in), ws = static_cast<std::size_t>(in),
                    ys = static_cast<std::size_t>(out);
  for_channel_blocks<C>(o0, o1, [&]<int CB>(int o) {
    const float* wb = w + static_cast<std::size_t>(o) * ws;
    for_row_tiles(n, [&]<int R>(int r) {
      dot_tile<Lanes, R, CB>(x + r * xs, xs, wb, ws, y + r * ys + o, ys, in, PlainDot{});
    });
  });
}

}  // namespace

void matmul_f32(const float* x, const float* w, float* y, int n, int out, int in, ThreadPool& pool) {
  if (n <= 0 || out <= 0) return;
  parallel_for_channels(pool, n, out, in, [&](int o0, int o1) {
    // Decode (n <= 2) is bandwidth bound: four channels at a time for more loads in flight.
    if (n <= 2)
      run_channels<4>(x, w, y, n, out, in, o0, o1);
    else
      run_channels<kBatchChannels>(x, w, y, n, out, in, o0, o1);
  });
}

}  // namespace inferlab::cpu
