#include "int4.h"

#include "inferlab/float_linear.h"
#include "inferlab/error.h"
#include "kernels/cpu/matmul_int4.h"
#include "kernels/ref/matmul_int4.h"

namespace inferlab::plugins {
namespace {

void check_group_size(int group_size) {
  check(group_size >= 8 && group_size <= 4096 && group_size % 8 == 0,
        "quantization 'int4': group_size must be a multiple of 8 in [8, 4096], got " +
            std::to_string(group_size));
}

}  // namespace

Int4Linear::Int4Linear(const std::vector<float>& weight, int out, int in, int group_size,
                       bool symmetric)
    : Linear(out, in), group_size_(group_size) {
  check(out > 0 && in > 0 && weight.size() == static_cast<std::size_t>(out) * in,
        "quantization 'int4': weight holds " + std::to_string(weight.size()) +
            " values, expected out*in = " + std::to_string(out) + "*" + std::to_string(in));
  check_group_size(group_size);
  const std::size_t cells = static_cast<std::size_t>(out) * ref::int4_groups(in, group_size);
  packed_.resize(static_cast<std::size_t>(out) * ref::int4_row_bytes(in));
  scale_.resize(cells);
  if (!symmetric) zero_.resize(cells);
  ref::quantize_int4_groups(weight.data(), out, in, group_size, packed_.data(), scale_.data(),
                            symmetric ? nullptr : zero_.data());
}

void Int4Linear::forward(const float* x, float* y, int n, Device& device) const {
  ThreadPool& pool = cpu_pool(device, "quantization 'int4'");
  cpu::matmul_int4(x, packed_.data(), scale_.data(), zero_.empty() ? nullptr : zero_.data(), y, n,
                   out_features(), in_features(), group_size_, pool);
}

std::uint64_t Int4Linear::weight_bytes() const {
  return static_cast<std::uint64_t>(packed_.size()) +
         static_cast<std::uint64_t>(scale_.size()) * sizeof(float) +
         static_cast<std::uint64_t>(zero_.size());
}

int Int4Linear::groups() const { return ref::int4_groups(in_features(), group_size_); }

std::vector<float> Int4Linear::dequantized() const {
  std::vector<float> w(static_cast<std::size_t>(out_features()) * in_features());
  ref::dequantize_int4(packed_.data(), scale_.data(), zero_.empty() ? nullptr : zero_.data(),
                       out_features(), in_features(), group_size_, w.data());
  return w;
}

Int4Quantization::Int4Quantization(int group_size, bool symmetric, bool skip_classifier)
    : group_size_(group_size), symmetric_(symmetric), skip_classifier_(skip_classifier) {
  check_group_size(group_size);
}

std::unique_ptr<Linear> Int4Quantization::make_linear(const std::string& name,
                                                      std::vector<float> weight, int out, int in) {
  if (skip_classifier_ && name == "classifier")
    return std::make_unique<FloatLinear>(std::move(weight), out, in);
  auto linear = std::make_unique<Int4Linear>(weight, out, in, group_size_, symmetric_);
  weight.clear();  // consumed: release the fp32 copy before the next layer is built
  weight.shrink_to_fit();
  return linear;
}

}  // namespace inferlab::plugins
