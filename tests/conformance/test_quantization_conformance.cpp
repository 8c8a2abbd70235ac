// Quantization conformance: every registered quantization plugin, on every device kind it
// declares, with its default parameters and each parameter at the ends of its range. On random
// weights of awkward shapes a Linear must compute x · Wᵀ within the error its storage pays
// for, report its shape and a storage size consistent with that precision, be deterministic,
// and choose a KV format that some registered attention plugin reads.
//
// Precision is read from weight_bytes(): the narrowest code width (32, 16, 8 or 4 bits) whose
// storage range holds it — at least the codes (rows padded to whole bytes), at most the codes
// plus an fp32 scale and a byte of zero point per 8 weights. The effective weights W_q are read
// back by running the linear on the identity, which splits the error in two: the kernel must
// compute exactly x · W_qᵀ (weight-only formats; smoothquant, which quantizes activations to
// int8 too, is held to the 8-bit bound instead), and W_q must be as close to W as that width
// promises. Since the
// width range is generous (8-bit per-channel storage also fits 4-bit plus scales), the storage
// must also be enough for the accuracy measured: no format is more accurate than its bits.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <iostream>

#include <gtest/gtest.h>

#include "inferlab/error.h"
#include "inferlab/support/rng.h"
#include "kernels/cpu/amx.h"
#include "kernels/cpu/gemm_amx_bf16.h"
#include "kernels/ref/half.h"
#include "plugin_cases.h"
#include "plugins/common/quantization/int4_linear.h"

namespace inferlab::testing {
namespace {

struct Shape {
  int out, in;
};
// Odd sizes (partial groups, odd nibble counts), multiples of 32/64/128 (whole groups).
constexpr Shape kShapes[] = {{37, 67}, {37, 128}, {5, 256}, {64, 64}, {1, 24}};
constexpr int kRows[] = {1, 3, 17};  // activations per forward: decode, a few, a prefill chunk

struct Precision {
  int bits = 0;      // code width the storage pays for; 0 = no width fits
  double bound = 0;  // max relative error of W_q (and of y) against the float weights
};

// Bytes of `bits`-wide codes for [out, in], each row padded to whole bytes, and the most that
// scales may add to them.
double code_bytes(Shape s, int bits) {
  return static_cast<double>(s.out) * static_cast<double>((static_cast<long long>(s.in) * bits + 7) / 8);
}
double scale_allowance(Shape s) { return static_cast<double>(s.out) * ((s.in + 7) / 8) * 5.0; }

// The narrowest width whose [codes, codes + scales] holds `bytes`.
Precision precision_of(std::uint64_t bytes, Shape s) {
  static const Precision tiers[] = {{4, 0.15}, {8, 2e-2}, {16, 1e-2}, {32, 1e-4}};
  for (const Precision& t : tiers)
    if (static_cast<double>(bytes) >= code_bytes(s, t.bits) &&
        static_cast<double>(bytes) <= code_bytes(s, t.bits) + scale_allowance(s))
      return t;
  return {};
}

// Bits per weight a uniform quantizer needs to reach relative error e on these weights
// (uniform in [-1, 1]: e ≈ 1 / (2^b - 1) with a per-row range), less one bit of slack for
// smarter formats; storage below that is a weight_bytes() that under-reports.
double bits_needed_for(double e) { return std::log2(1.0 / std::max(e, 1e-7) + 1.0) - 1.0; }

std::vector<float> random_matrix(int rows, int cols, std::uint64_t seed, bool normal) {
  Rng rng(seed);
  std::vector<float> m(static_cast<std::size_t>(rows) * cols);
  for (float& v : m) v = normal ? static_cast<float>(rng.normal()) : static_cast<float>(rng.uniform() * 2.0 - 1.0);
  return m;
}

// y[n, out] = x[n, in] · W^T in double.
std::vector<double> reference_linear(const std::vector<float>& x, const std::vector<float>& w, int n, Shape s) {
  std::vector<double> y(static_cast<std::size_t>(n) * s.out);
  for (int r = 0; r < n; ++r)
    for (int o = 0; o < s.out; ++o) {
      double acc = 0;
      const float* xr = &x[static_cast<std::size_t>(r) * s.in];
      const float* wo = &w[static_cast<std::size_t>(o) * s.in];
      for (int i = 0; i < s.in; ++i) acc += static_cast<double>(xr[i]) * wo[i];
      y[static_cast<std::size_t>(r) * s.out + o] = acc;
    }
  return y;
}

// ||Y - Y_want||_F over the size Y_ref is expected to have for these inputs and weights
// (sqrt(sum_r |x_r|^2 * |W|_F^2 / in)): the weights' relative error, not the luck of a row whose
// dot products happen to cancel.
double relative_error(const std::vector<float>& got, const std::vector<double>& want, const std::vector<float>& x,
                      const std::vector<float>& w, Shape s) {
  double diff = 0, xx = 0, ww = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    diff += (got[i] - want[i]) * (got[i] - want[i]);
  }
  for (float v : x) xx += static_cast<double>(v) * v;
  for (float v : w) ww += static_cast<double>(v) * v;
  return std::sqrt(diff / (xx * ww / s.in));
}

// ||W_q - W||_F / ||W||_F.
double weight_error(const std::vector<float>& wq, const std::vector<float>& w) {
  double diff = 0, norm = 0;
  for (std::size_t i = 0; i < w.size(); ++i) {
    if (!std::isfinite(wq[i])) return INFINITY;
    diff += (static_cast<double>(wq[i]) - w[i]) * (static_cast<double>(wq[i]) - w[i]);
    norm += static_cast<double>(w[i]) * w[i];
  }
  return std::sqrt(diff / norm);
}

class QuantizationConformance : public ::testing::TestWithParam<PluginCase> {
 protected:
  void SetUp() override {
    std::string why;
    device_ = open_device(GetParam().device, why);
    if (!device_) GTEST_SKIP() << why;
    // A small model whose linears have the shapes below.
    ModelConfig model{.name = "conformance", .dim = 64, .hidden_dim = 128, .n_layers = 1, .n_heads = 4, .n_kv_heads = 2,
                      .vocab_size = 37, .max_seq_len = 256};
    INFERLAB_SKIP_IF_REFUSED(GetParam(), model);
    quant_ = make();
  }

  std::shared_ptr<Quantization> make() {
    return conformance_registry().create_quantization(GetParam().plugin, resolve_case(GetParam()), *device_);
  }

  // The linear for `weight`, or null when the strategy refuses the shape (printed).
  std::unique_ptr<Linear> make_linear(Quantization& q, const std::string& name, const std::vector<float>& weight,
                                      Shape s) {
    try {
      return q.make_linear(name, weight, s.out, s.in);
    } catch (const Error& e) {
      std::cout << "[  SKIPPED ] shape " << s.out << "x" << s.in << " refused: " << e.what() << "\n";
      return nullptr;
    }
  }

  // y[n, out] of `linear` on host x, through device memory.
  std::vector<float> forward(const Linear& linear, const std::vector<float>& x, int n) {
    const std::size_t y_floats = static_cast<std::size_t>(n) * linear.out_features();
    Buffer xd(*device_, x.size() * sizeof(float)), yd(*device_, y_floats * sizeof(float));
    device_->copy_to_device(xd.data(), x.data(), x.size() * sizeof(float));
    linear.forward(xd.as<const float>(), yd.as<float>(), n, *device_);
    device_->synchronize();
    std::vector<float> y(y_floats);
    device_->copy_to_host(y.data(), yd.data(), y_floats * sizeof(float));
    return y;
  }

  // W_q [out, in]: the weights the linear really applies, read by running it on the identity.
  std::vector<float> effective_weights(const Linear& linear, Shape s) {
    std::vector<float> eye(static_cast<std::size_t>(s.in) * s.in, 0.0f);
    for (int i = 0; i < s.in; ++i) eye[static_cast<std::size_t>(i) * s.in + i] = 1.0f;
    const std::vector<float> y = forward(linear, eye, s.in);  // [in, out] = W_q^T
    std::vector<float> wq(static_cast<std::size_t>(s.out) * s.in);
    for (int o = 0; o < s.out; ++o)
      for (int i = 0; i < s.in; ++i)
        wq[static_cast<std::size_t>(o) * s.in + i] = y[static_cast<std::size_t>(i) * s.out + o];
    return wq;
  }

  std::unique_ptr<Device> device_;
  std::shared_ptr<Quantization> quant_;
};

// y = x · W_qᵀ exactly (the kernel), W_q within the bound of the width weight_bytes() pays for
// (the format), and so y = x · Wᵀ within that bound, for several shapes and batch sizes, for an
// ordinary layer and for the classifier (which some strategies keep wider).
TEST_P(QuantizationConformance, LinearMatchesFloatReferenceWithinItsPrecision) {
  int ran = 0;
  std::uint64_t seed = 10;
  for (Shape s : kShapes)
    for (const char* name : {"layers.0.wq", "classifier"}) {
      const std::vector<float> w = random_matrix(s.out, s.in, ++seed, false);
      std::unique_ptr<Linear> linear = make_linear(*quant_, name, w, s);
      if (!linear) continue;
      ++ran;
      const std::uint64_t bytes = linear->weight_bytes();
      const double bits_per_weight = 8.0 * static_cast<double>(bytes) / (static_cast<double>(s.out) * s.in);
      const Precision p = precision_of(bytes, s);
      const std::vector<float> wq = effective_weights(*linear, s);
      const double e_w = weight_error(wq, w);
      SCOPED_TRACE(std::string(name) + " " + std::to_string(s.out) + "x" + std::to_string(s.in) + ": " +
                   std::to_string(bits_per_weight) + " bits/weight -> " + std::to_string(p.bits) +
                   "-bit bound " + std::to_string(p.bound) + ", weight error " + std::to_string(e_w));
      ASSERT_NE(p.bits, 0) << "weight_bytes() fits no precision (see WeightBytesAndShapeAreConsistent)";
      EXPECT_LT(e_w, p.bound) << "the effective weights are further from W than the storage promises";
      EXPECT_GE(bits_per_weight, bits_needed_for(e_w))
          << "more accurate than its storage allows: weight_bytes() under-reports";
      for (int n : kRows) {
        SCOPED_TRACE(std::to_string(n) + " rows");
        const std::vector<float> x = random_matrix(n, s.in, ++seed, true);
        const std::vector<float> y = forward(*linear, x, n);
        // Strategies that quantize activations too (W8A8) pay an 8-bit activation error here:
        // smoothquant (unless its quantize = false) and any strategy whose resolved activations
        // are "int8" (gguf's default), or "auto" where that means int8 (int4, gptq and awq with
        // group_size a multiple of 32: plugins/common/quantization/int4_linear.h; int8's "auto" is
        // int16 or fp32).
        const auto& given = GetParam().given;
        const Params resolved = resolve_case(GetParam());
        const auto act = resolved.values().find("activations");
        const bool int8_activations =
            act != resolved.values().end() && std::holds_alternative<std::string>(act->second) &&
            (std::get<std::string>(act->second) == "int8" ||
             (std::get<std::string>(act->second) == "auto" && resolved.values().count("group_size") &&
              int4_activations("auto", static_cast<int>(resolved.get_int("group_size"))) == Int4Activations::kInt8));
        const bool quantizes_activations =
            int8_activations || (GetParam().plugin == "smoothquant" &&
                                 !(given.count("quantize") && !std::get<bool>(given.at("quantize"))));
        // On CUDA the half linears round the activation rows to their type too (one cuBLAS
        // GEMM with both operands f16 / bf16, as the plugins' READMEs say): the kernel must
        // compute round(x) · W_q^T.
        const bool half_activations = GetParam().device == DeviceKind::kCuda &&
                                      (GetParam().plugin == "f16" || GetParam().plugin == "bf16");
        // On an AMX CPU, amx = "bf16" (bf16's default) rounds the rows of a 16-row-or-more
        // prefill to bf16 as well (quantization/bf16 README); "split" stays within 1e-4.
        const std::string amx = given.count("amx") ? std::get<std::string>(given.at("amx"))
                                : GetParam().plugin == "bf16" ? "bf16" : "split";
        const bool amx_bf16_rows = GetParam().device == DeviceKind::kCpu &&
                                   (GetParam().plugin == "f16" || GetParam().plugin == "bf16") && amx == "bf16" &&
                                   n >= cpu::kAmxBf16MinRows && cpu::amx_bf16_enabled();
        // activations = "int16" (int8, int4, gptq, awq on the CPU) stays within 1e-4 of the exact
        // activations (2^-16 of each 32-block's largest) and needs no rounding here.
        std::vector<float> x_in = x;
        if (amx_bf16_rows)
          for (float& v : x_in) v = ref::bf16_to_float(ref::float_to_bf16(v));
        if (half_activations)
          for (float& v : x_in)
            v = GetParam().plugin == "f16" ? ref::f16_to_float(ref::float_to_f16(v))
                                           : ref::bf16_to_float(ref::float_to_bf16(v));
        EXPECT_LT(relative_error(y, reference_linear(x_in, wq, n, s), x_in, wq, s),
                  quantizes_activations ? 2e-2 : 1e-4)
            << "the kernel does not compute x · W_q^T for the weights it applies to a single input";
        EXPECT_LT(relative_error(y, reference_linear(x, w, n, s), x, w, s), p.bound);
      }
    }
  EXPECT_GT(ran, 0) << "the strategy refused every shape";
}

// Storage between the ideal for its precision and that plus scales; shape reported as given.
TEST_P(QuantizationConformance, WeightBytesAndShapeAreConsistent) {
  int ran = 0;
  for (Shape s : kShapes) {
    SCOPED_TRACE(std::to_string(s.out) + "x" + std::to_string(s.in));
    std::unique_ptr<Linear> linear = make_linear(*quant_, "layers.0.w1", random_matrix(s.out, s.in, 7, false), s);
    if (!linear) continue;
    ++ran;
    EXPECT_EQ(linear->out_features(), s.out);
    EXPECT_EQ(linear->in_features(), s.in);
    const Precision p = precision_of(linear->weight_bytes(), s);
    EXPECT_NE(p.bits, 0) << linear->weight_bytes() << " bytes: not the codes of any width (4, 8, 16, 32 bits; "
                         << code_bytes(s, 4) << ".." << code_bytes(s, 32) + scale_allowance(s)
                         << " bytes) plus at most 5 bytes of scales per 8 weights";
  }
  EXPECT_GT(ran, 0) << "the strategy refused every shape";
}

// Two strategies built from the same weights compute bit-identical outputs, and one linear
// gives the same bits when called again.
TEST_P(QuantizationConformance, BuildsAndForwardsAreDeterministic) {
  std::shared_ptr<Quantization> again = make();
  int ran = 0;
  for (Shape s : kShapes) {
    SCOPED_TRACE(std::to_string(s.out) + "x" + std::to_string(s.in));
    const std::vector<float> w = random_matrix(s.out, s.in, 99, false);
    std::unique_ptr<Linear> a = make_linear(*quant_, "layers.0.wo", w, s);
    std::unique_ptr<Linear> b = make_linear(*again, "layers.0.wo", w, s);
    if (!a || !b) continue;
    ++ran;
    EXPECT_EQ(a->weight_bytes(), b->weight_bytes());
    const std::vector<float> x = random_matrix(5, s.in, 100, true);
    const std::vector<float> ya = forward(*a, x, 5), yb = forward(*b, x, 5), ya2 = forward(*a, x, 5);
    EXPECT_EQ(std::memcmp(ya.data(), yb.data(), ya.size() * sizeof(float)), 0) << "two builds differ";
    EXPECT_EQ(std::memcmp(ya.data(), ya2.data(), ya.size() * sizeof(float)), 0) << "two calls differ";
  }
  EXPECT_GT(ran, 0) << "the strategy refused every shape";
}

// dequantize_row (the tied embedding's lookup) returns the weights forward applies: the rows of
// W_q read back through the identity, for every row of every shape, the classifier included.
TEST_P(QuantizationConformance, DequantizedRowsAreTheAppliedWeights) {
  int ran = 0;
  for (Shape s : kShapes)
    for (const char* name : {"layers.0.w2", "classifier"}) {
      SCOPED_TRACE(std::string(name) + " " + std::to_string(s.out) + "x" + std::to_string(s.in));
      const std::vector<float> w = random_matrix(s.out, s.in, 31, false);
      std::unique_ptr<Linear> linear = make_linear(*quant_, name, w, s);
      if (!linear) continue;
      ++ran;
      const std::vector<float> wq = effective_weights(*linear, s);
      std::vector<float> row(static_cast<std::size_t>(s.in));
      for (int o = 0; o < s.out; ++o) {
        std::fill(row.begin(), row.end(), std::nanf(""));
        linear->dequantize_row(o, row.data());
        const float* want = wq.data() + static_cast<std::size_t>(o) * s.in;
        float peak = 0;
        for (int i = 0; i < s.in; ++i) peak = std::max(peak, std::fabs(want[i]));
        // The identity's activations are exact in int8 blocks (one 127 per block) up to the
        // block scale's rounding: a few ulps of the row's peak at most.
        for (int i = 0; i < s.in; ++i)
          ASSERT_NEAR(row[static_cast<std::size_t>(i)], want[i], 4e-6f * std::max(peak, 1e-30f)) << "row " << o << " col " << i;
      }
      EXPECT_THROW(linear->dequantize_row(s.out, row.data()), Error);
      EXPECT_THROW(linear->dequantize_row(-1, row.data()), Error);
    }
  EXPECT_GT(ran, 0) << "the strategy refused every shape";
}

INSTANTIATE_TEST_SUITE_P(Plugins, QuantizationConformance,
                         ::testing::ValuesIn(plugin_cases(PluginKind::kQuantization)), case_name);
// `inferlab conformance LIB.so` instantiates only the suites of its plugins' kinds.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(QuantizationConformance);

}  // namespace
}  // namespace inferlab::testing
