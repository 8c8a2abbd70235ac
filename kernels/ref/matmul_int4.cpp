#include "kernels/ref/matmul_int4.h"

#include <algorithm>
#include <cmath>

namespace inferlab::ref {
namespace {

int code_at(const std::uint8_t* row, int i) { return (row[i / 2] >> ((i & 1) * 4)) & 0xF; }

// scale[o, g] * (u - zero[o, g]) for weight (o, i), exact in double.
double weight_at(const std::uint8_t* packed, const float* scale, const std::uint8_t* zero,
                 int o, int i, int in, int group_size) {
  const std::size_t G = static_cast<std::size_t>(int4_groups(in, group_size));
  const std::size_t og = static_cast<std::size_t>(o) * G + static_cast<std::size_t>(i / group_size);
  const int u = code_at(packed + static_cast<std::size_t>(o) * int4_row_bytes(in), i);
  const int z = zero ? zero[og] : kInt4SymmetricZero;
  return static_cast<double>(scale[og]) * (u - z);
}

}  // namespace

Int4GroupGrid int4_group_grid(float lo, float hi, float amax, bool asymmetric) {
  if (!asymmetric) return {amax / 7.0f, kInt4SymmetricZero};
  const float s = (hi - lo) / 15.0f;
  return {s, s > 0.0f ? std::clamp(std::lround(-lo / s), 0L, 15L) : 0L};
}

int int4_code(float w, Int4GroupGrid grid) {
  return static_cast<int>(std::clamp((grid.scale > 0.0f ? std::lround(w / grid.scale) : 0L) + grid.zero, 0L, 15L));
}

void quantize_int4_groups(const float* w, int out, int in, int group_size, std::uint8_t* packed,
                          float* scale, std::uint8_t* zero) {
  const int G = int4_groups(in, group_size);
  const std::size_t rb = int4_row_bytes(in);
  std::fill(packed, packed + static_cast<std::size_t>(out) * rb, std::uint8_t{0});
  for (int o = 0; o < out; ++o) {
    const float* row = w + static_cast<std::size_t>(o) * in;
    std::uint8_t* prow = packed + static_cast<std::size_t>(o) * rb;
    for (int g = 0; g < G; ++g) {
      const int k0 = g * group_size, k1 = std::min(in, k0 + group_size);
      float lo = 0.0f, hi = 0.0f, amax = 0.0f;
      for (int i = k0; i < k1; ++i) {
        lo = std::min(lo, row[i]);
        hi = std::max(hi, row[i]);
        amax = std::max(amax, std::fabs(row[i]));
      }
      const std::size_t og = static_cast<std::size_t>(o) * G + g;
      const Int4GroupGrid grid = int4_group_grid(lo, hi, amax, zero != nullptr);
      if (zero) zero[og] = static_cast<std::uint8_t>(grid.zero);
      scale[og] = grid.scale;
      for (int i = k0; i < k1; ++i)
        prow[i / 2] = static_cast<std::uint8_t>(prow[i / 2] | (int4_code(row[i], grid) << ((i & 1) * 4)));
    }
  }
}

void dequantize_int4(const std::uint8_t* packed, const float* scale, const std::uint8_t* zero,
                     int out, int in, int group_size, float* w) {
  for (int o = 0; o < out; ++o)
    for (int i = 0; i < in; ++i)
      w[static_cast<std::size_t>(o) * in + i] =
          static_cast<float>(weight_at(packed, scale, zero, o, i, in, group_size));
}

void matmul_int4(const float* x, const std::uint8_t* packed, const float* scale,
                 const std::uint8_t* zero, float* y, int n, int out, int in, int group_size) {
  for (int r = 0; r < n; ++r) {
    const float* xr = x + static_cast<std::size_t>(r) * in;
    for (int o = 0; o < out; ++o) {
      double acc = 0.0;
      for (int i = 0; i < in; ++i)
        acc += static_cast<double>(xr[i]) * weight_at(packed, scale, zero, o, i, in, group_size);
      y[static_cast<std::size_t>(r) * out + o] = static_cast<float>(acc);
    }
  }
}

void matmul_int4_act(const std::int8_t* xq, const float* xs, const std::uint8_t* packed, const float* scale,
                     const std::uint8_t* zero, float* y, int n, int out, int in, int group_size) {
  constexpr int kBlock = 32;  // ref::kActBlock
  const int blocks = (in + kBlock - 1) / kBlock, groups = int4_groups(in, group_size);
  const std::size_t row_bytes = int4_row_bytes(in);
  for (int r = 0; r < n; ++r)
    for (int o = 0; o < out; ++o) {
      double acc = 0.0;
      for (int b = 0; b < blocks; ++b) {
        const int g = b * kBlock / group_size;
        long long ux = 0, sx = 0;
        for (int i = b * kBlock; i < std::min(in, (b + 1) * kBlock); ++i) {
          const std::uint8_t byte = packed[static_cast<std::size_t>(o) * row_bytes + static_cast<std::size_t>(i / 2)];
          const int u = (i % 2 == 0) ? (byte & 0x0F) : (byte >> 4);
          const int x = xq[static_cast<std::size_t>(r) * in + i];
          ux += static_cast<long long>(u) * x;
          sx += x;
        }
        const int z = zero ? zero[static_cast<std::size_t>(o) * groups + g] : kInt4SymmetricZero;
        acc += static_cast<double>(xs[static_cast<std::size_t>(r) * blocks + b]) *
               static_cast<double>(scale[static_cast<std::size_t>(o) * groups + g]) *
               static_cast<double>(ux - static_cast<long long>(z) * sx);
      }
      y[static_cast<std::size_t>(r) * out + o] = static_cast<float>(acc);
    }
}

}  // namespace inferlab::ref
