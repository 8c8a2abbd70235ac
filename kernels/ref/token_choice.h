// The arithmetic of a sampled token choice, shared bit for bit by the host (ref::sample_row,
// which the decoders' sample_token calls without top-k / top-p) and the GPU
// (kernels/cuda/classify.cu sample_rows), so that a token drawn on the device with the uniform u
// is the token the host draws with the same u — not merely one from the same distribution.
//
// The draw: top = the largest logit (NaNs ignored); weights w_i = sample_weight((l_i - top) / T)
// in double; the row is cut into kSampleChunks contiguous chunks of ceil(vocab / kSampleChunks)
// indices (the GPU's block has one thread per chunk); each chunk's weights are summed in index
// order, the chunk sums summed in chunk order into exclusive prefixes and the total; r = u *
// total; the chunk whose [prefix, prefix + sum) holds r is walked, prefix + w_begin + ..., to the
// first index whose running sum exceeds r (its last index when rounding leaves none; vocab - 1
// when no chunk holds r). Every step is a correctly rounded IEEE double operation in a fixed
// order on both sides; sample_weight replaces libm's exp (whose last bit differs between glibc
// and CUDA) by a fixed polynomial evaluated with explicit fma.
//
// NaN and infinities: a NaN logit weighs 0 and is never drawn; so is -inf. A row whose largest
// logit is +inf, or whose logits are all NaN or -inf, has no finite weight: the draw is vocab - 1.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define INFERLAB_CHOICE_HD __host__ __device__
#else
#define INFERLAB_CHOICE_HD
#endif

namespace inferlab::ref {

// Chunks of a row in a sampled draw (the GPU kernel's threads per row).
inline constexpr int kSampleChunks = 256;

// exp(x) for x <= 0 to within about an ulp, bit-identical on the host and the GPU: 0 for x below
// -700 (a weight under 1e-304 of the top one), for -inf and for NaN. x = k ln2 + r with
// k = rint(x / ln2) and |r| <= ln2 / 2 (Cody-Waite, two fma), exp(r) by its Taylor series to
// r^13 (truncation below 1e-17 relative) in Horner form with fma, times 2^k built from its bits
// (k >= -1010: a normal number, so the product is exact and a compiler that contracts it into a
// following add changes no bit).
INFERLAB_CHOICE_HD inline double sample_weight(double x) {
  if (!(x >= -700.0)) return 0.0;
  if (x > 700.0) x = 700.0;  // (not reached: x = logit - max is never positive)
  const double k = rint(x * 1.4426950408889634);                  // x / ln2, to nearest
  double r = fma(-k, 6.93147180369123816490e-01, x);              // ln2, high part
  r = fma(-k, 1.90821492927058770002e-10, r);                     // ln2, low part
  constexpr double c[14] = {1.0,
                            1.0,
                            1.0 / 2.0,
                            1.0 / 6.0,
                            1.0 / 24.0,
                            1.0 / 120.0,
                            1.0 / 720.0,
                            1.0 / 5040.0,
                            1.0 / 40320.0,
                            1.0 / 362880.0,
                            1.0 / 3628800.0,
                            1.0 / 39916800.0,
                            1.0 / 479001600.0,
                            1.0 / 6227020800.0};  // 1 / n!
  double p = c[13];
  for (int n = 12; n >= 0; --n) p = fma(p, r, c[n]);
  const std::uint64_t bits = static_cast<std::uint64_t>(static_cast<int>(k) + 1023) << 52;
  double scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

// The weight of `logit` in a row whose largest logit is `top`, at temperature T > 0.
INFERLAB_CHOICE_HD inline double sample_weight(float logit, float top, double temperature) {
  return sample_weight((static_cast<double>(logit) - static_cast<double>(top)) / temperature);
}

// Indices [begin, end) of chunk c of a row of `vocab` (empty past the row's end).
INFERLAB_CHOICE_HD inline void sample_chunk(int vocab, int c, int& begin, int& end) {
  const int per = (vocab + kSampleChunks - 1) / kSampleChunks;
  begin = c * per < vocab ? c * per : vocab;
  end = begin + per < vocab ? begin + per : vocab;
}

}  // namespace inferlab::ref
