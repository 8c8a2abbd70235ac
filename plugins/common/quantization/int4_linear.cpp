#include "plugins/common/quantization/int4_linear.h"

#include <algorithm>
#include <cmath>

#include "inferlab/error.h"
#include "kernels/cpu/matmul_int4.h"
#include "kernels/cpu/matmul_int4_act.h"
#include "kernels/cpu/matmul_int8_act.h"
#include "kernels/ref/matmul_int8.h"
#include "kernels/ref/matmul_int4.h"

namespace inferlab {

void check_int4_group_size(int group_size, const std::string& who) {
  check(group_size >= 8 && group_size <= 4096 && group_size % 8 == 0,
        "quantization '" + who + "': group_size must be a multiple of 8 in [8, 4096], got " +
            std::to_string(group_size));
}

bool int4_int8_activations(const std::string& activations, int group_size) {
  check(activations == "auto" || activations == "fp32" || activations == "int8",
        "int4 activations = \"" + activations + "\"; allowed: auto, fp32, int8");
  return activations == "int8" || (activations == "auto" && group_size % ref::kActBlock == 0);
}

int Int4Grid::code(float w) const {
  return static_cast<int>(std::clamp((scale > 0.0f ? std::lround(w / scale) : 0L) + zero, 0L, 15L));
}

Int4Grid int4_grid(float lo, float hi) {
  lo = std::min(lo, 0.0f);
  hi = std::max(hi, 0.0f);
  Int4Grid g;
  g.scale = (hi - lo) / 15.0f;
  g.zero = g.scale > 0.0f ? static_cast<int>(std::clamp(std::lround(-lo / g.scale), 0L, 15L)) : 0;
  return g;
}

Int4Linear::Int4Linear(const std::vector<float>& weight, int out, int in, int group_size, bool symmetric)
    : Linear(out, in), group_size_(group_size) {
  check(out > 0 && in > 0 && weight.size() == static_cast<std::size_t>(out) * in,
        "quantization 'int4': weight holds " + std::to_string(weight.size()) +
            " values, expected out*in = " + std::to_string(out) + "*" + std::to_string(in));
  check_int4_group_size(group_size, "int4");
  const std::size_t cells = static_cast<std::size_t>(out) * ref::int4_groups(in, group_size);
  packed_.resize(static_cast<std::size_t>(out) * ref::int4_row_bytes(in));
  scale_.resize(cells);
  if (!symmetric) zero_.resize(cells);
  ref::quantize_int4_groups(weight.data(), out, in, group_size, packed_.data(), scale_.data(),
                            symmetric ? nullptr : zero_.data());
}

Int4Linear::Int4Linear(int out, int in, int group_size, std::vector<std::uint8_t> packed, std::vector<float> scale,
                       std::vector<std::uint8_t> zero)
    : Linear(out, in), group_size_(group_size), packed_(packed.begin(), packed.end()),
      scale_(scale.begin(), scale.end()), zero_(zero.begin(), zero.end()) {
  check_int4_group_size(group_size, "int4");
  const std::size_t cells = static_cast<std::size_t>(out) * ref::int4_groups(in, group_size);
  check(packed_.size() == static_cast<std::size_t>(out) * ref::int4_row_bytes(in) && scale_.size() == cells &&
            (zero_.empty() || zero_.size() == cells),
        "Int4Linear: packed codes, scales or zero points do not match [" + std::to_string(out) + ", " +
            std::to_string(in) + "] in groups of " + std::to_string(group_size));
}

void Int4Linear::set_int8_activations(bool on) {
  check(!on || group_size_ % ref::kActBlock == 0,
        "int4 with activations = \"int8\" needs group_size a multiple of " + std::to_string(ref::kActBlock) +
            ", got " + std::to_string(group_size_));
  int8_activations_ = on;
}

void Int4Linear::forward(const float* x, float* y, int n, Device& device) const {
  ThreadPool& pool = cpu_pool(device, "int4 linear");
  if (int8_activations_) {
    thread_local std::vector<std::int8_t> xq;
    thread_local std::vector<float> xs;
    const int in = in_features();
    xq.resize(static_cast<std::size_t>(n) * in);
    xs.resize(static_cast<std::size_t>(n) * ref::act_blocks(in));
    cpu::quantize_act_rows(x, n, in, xq.data(), xs.data(), pool);
    forward_act_blocks(xq.data(), xs.data(), y, n, device);
    return;
  }
  cpu::matmul_int4(x, packed_.data(), scale_.data(), zero_.empty() ? nullptr : zero_.data(), y, n,
                   out_features(), in_features(), group_size_, pool);
}

void Int4Linear::forward_act_blocks(const std::int8_t* xq, const float* xs, float* y, int n, Device& device) const {
  if (!int8_activations_) Linear::forward_act_blocks(xq, xs, y, n, device);  // throws
  cpu::matmul_int4_act(xq, xs, packed_.data(), scale_.data(), zero_.empty() ? nullptr : zero_.data(), y, n,
                       out_features(), in_features(), group_size_, cpu_pool(device, "int4 linear"));
}

void Int4Linear::dequantize_row(int row, float* out) const {
  check_linear_row(*this, row, "int4 linear");
  const std::size_t r = static_cast<std::size_t>(row), g = static_cast<std::size_t>(groups());
  const std::size_t row_bytes = static_cast<std::size_t>(in_features() + 1) / 2;
  ref::dequantize_int4(packed_.data() + r * row_bytes, scale_.data() + r * g,
                       zero_.empty() ? nullptr : zero_.data() + r * g, 1, in_features(), group_size_, out);
}

std::uint64_t Int4Linear::weight_bytes() const {
  return static_cast<std::uint64_t>(packed_.size()) + static_cast<std::uint64_t>(scale_.size()) * sizeof(float) +
         static_cast<std::uint64_t>(zero_.size());
}

int Int4Linear::groups() const { return ref::int4_groups(in_features(), group_size_); }

std::vector<float> Int4Linear::dequantized() const {
  std::vector<float> w(static_cast<std::size_t>(out_features()) * in_features());
  ref::dequantize_int4(packed_.data(), scale_.data(), zero_.empty() ? nullptr : zero_.data(), out_features(),
                       in_features(), group_size_, w.data());
  return w;
}

}  // namespace inferlab
