// Reference fused decode ops: the unfused reference ops in sequence (see ops_fused.h).
#include "kernels/ref/ops_fused.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

#include "kernels/ref/matmul_int8.h"
#include "kernels/ref/ops.h"
#include "kernels/ref/token_choice.h"

namespace inferlab::ref {

void residual_rmsnorm(float* x, const float* y, const float* w, float* out, std::int8_t* act_q, float* act_scale,
                      int rows, int dim, float eps) {
  const auto d = static_cast<std::size_t>(dim);
  std::vector<float> normed(d);
  for (int r = 0; r < rows; ++r) {
    float* xr = x + static_cast<std::size_t>(r) * d;
    if (y != nullptr) add(xr, y + static_cast<std::size_t>(r) * d, dim);
    rmsnorm(normed.data(), xr, w, dim, eps);
    if (out != nullptr)
      for (std::size_t i = 0; i < d; ++i) out[static_cast<std::size_t>(r) * d + i] = normed[i];
    if (act_q != nullptr)
      quantize_act_rows(normed.data(), 1, dim, act_q + static_cast<std::size_t>(r) * d,
                        act_scale + static_cast<std::size_t>(r) * static_cast<std::size_t>(act_blocks(dim)));
  }
}

void rope_kv_write_f32(float* q, float* k, const float* v, const int* positions, const int* slots, int rows,
                       int n_heads, int n_kv_heads, int head_dim, float theta, RopeStyle style, float* k_cache,
                       float* v_cache) {
  const std::size_t qd = static_cast<std::size_t>(n_heads) * head_dim,
                    kvd = static_cast<std::size_t>(n_kv_heads) * head_dim;
  for (int r = 0; r < rows; ++r) {
    rope(q + r * qd, n_heads, head_dim, positions[r], theta, style);
    rope(k + r * kvd, n_kv_heads, head_dim, positions[r], theta, style);
  }
  kv_write(k_cache, k, slots, rows, static_cast<int>(kvd));
  kv_write(v_cache, v, slots, rows, static_cast<int>(kvd));
}

void swiglu_quantize(float* gate, const float* up, std::int8_t* act_q, float* act_scale, int rows, int width) {
  swiglu(gate, up, rows * width);
  quantize_act_rows(gate, rows, width, act_q, act_scale);
}

int argmax(const float* logits, int vocab) {
  if (std::isnan(logits[0])) return 0;
  int at = 0;
  for (int i = 1; i < vocab; ++i)
    if (logits[i] > logits[at]) at = i;  // a NaN compares false: never taken
  return at;
}

int sample_row(const float* logits, int vocab, double temperature, double u) {
  float top = -std::numeric_limits<float>::infinity();
  for (int i = 0; i < vocab; ++i) top = std::fmax(top, logits[i]);  // NaNs ignored, as fmaxf on the GPU
  double sums[kSampleChunks];  // each chunk's weights in index order
  for (int c = 0; c < kSampleChunks; ++c) {
    int begin = 0, end = 0;
    sample_chunk(vocab, c, begin, end);
    double sum = 0.0;
    for (int i = begin; i < end; ++i) sum += sample_weight(logits[i], top, temperature);
    sums[c] = sum;
  }
  double prefix[kSampleChunks], total = 0.0;  // exclusive prefixes in chunk order
  for (int c = 0; c < kSampleChunks; ++c) {
    prefix[c] = total;
    total += sums[c];
  }
  const double r = u * total;
  for (int c = 0; c < kSampleChunks; ++c) {
    int begin = 0, end = 0;
    sample_chunk(vocab, c, begin, end);
    if (!(begin < end && prefix[c] <= r && r < prefix[c] + sums[c])) continue;
    double cum = prefix[c];
    for (int i = begin; i < end; ++i) {
      cum += sample_weight(logits[i], top, temperature);
      if (r < cum) return i;
    }
    return end - 1;  // rounding: the walk's sum fell short of prefix + sum
  }
  return vocab - 1;  // r at the very top (or no finite weight)
}

}  // namespace inferlab::ref
