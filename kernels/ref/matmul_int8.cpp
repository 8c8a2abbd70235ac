#include "kernels/ref/matmul_int8.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

namespace inferlab::ref {

void quantize_int8_rows(const float* w, int out, int in, std::int8_t* q, float* scale) {
  for (int o = 0; o < out; ++o) {
    const float* row = w + static_cast<std::size_t>(o) * in;
    std::int8_t* qrow = q + static_cast<std::size_t>(o) * in;
    float amax = 0.0f;
    for (int i = 0; i < in; ++i) amax = std::max(amax, std::fabs(row[i]));
    const float s = amax / 127.0f;
    scale[o] = s;
    for (int i = 0; i < in; ++i) {
      long v = s > 0.0f ? std::lround(row[i] / s) : 0;
      qrow[i] = static_cast<std::int8_t>(std::clamp(v, -127L, 127L));
    }
  }
}

void matmul_int8(const float* x, const std::int8_t* q, const float* scale, float* y, int n,
                 int out, int in) {
  for (int r = 0; r < n; ++r) {
    const float* xr = x + static_cast<std::size_t>(r) * in;
    for (int o = 0; o < out; ++o) {
      const std::int8_t* qo = q + static_cast<std::size_t>(o) * in;
      double acc = 0.0;
      for (int i = 0; i < in; ++i) acc += static_cast<double>(xr[i]) * qo[i];
      y[static_cast<std::size_t>(r) * out + o] = static_cast<float>(acc * scale[o]);
    }
  }
}

void quantize_act_rows(const float* x, int n, int in, std::int8_t* xq, float* xs) {
  const int blocks = act_blocks(in);
  for (int r = 0; r < n; ++r)
    for (int b = 0; b < blocks; ++b) {
      const int i0 = b * kActBlock, i1 = std::min(in, i0 + kActBlock);
      const float* xr = x + static_cast<std::size_t>(r) * in;
      float amax = 0.0f;
      for (int i = i0; i < i1; ++i) amax = std::max(amax, std::fabs(xr[i]));
      const float s = amax / 127.0f;
      xs[static_cast<std::size_t>(r) * blocks + b] = s;
      const float inv = s > 0.0f ? 1.0f / s : 0.0f;
      for (int i = i0; i < i1; ++i)
        xq[static_cast<std::size_t>(r) * in + i] =
            static_cast<std::int8_t>(std::clamp(std::lround(xr[i] * inv), -127L, 127L));
    }
}

void matmul_int8_act(const std::int8_t* xq, const float* xs, const std::int8_t* q, const float* scale, float* y,
                     int n, int out, int in) {
  const int blocks = act_blocks(in);
  for (int r = 0; r < n; ++r)
    for (int o = 0; o < out; ++o) {
      double acc = 0.0;
      for (int b = 0; b < blocks; ++b) {
        long long dot = 0;
        for (int i = b * kActBlock; i < std::min(in, (b + 1) * kActBlock); ++i)
          dot += static_cast<long long>(xq[static_cast<std::size_t>(r) * in + i]) * q[static_cast<std::size_t>(o) * in + i];
        acc += static_cast<double>(xs[static_cast<std::size_t>(r) * blocks + b]) * static_cast<double>(dot);
      }
      y[static_cast<std::size_t>(r) * out + o] = static_cast<float>(acc * scale[o]);
    }
}

}  // namespace inferlab::ref
