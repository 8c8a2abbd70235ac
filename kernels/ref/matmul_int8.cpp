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

}  // namespace inferlab::ref
