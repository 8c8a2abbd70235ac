// Attention × KV format conformance: every registered attention plugin that declares a
// KV dtype besides f32, on the CPU, reads every KV format it declares (f16, bf16, int8, int4,
// keys-only, values-only) of an awkward paged problem. Two checks per format:
//   1. against kernels/ref on the dequantized K/V (what the format stores) within the f32
//      tolerance: the plugin dequantizes with the shared routine and nothing else changes;
//   2. against kernels/ref on the original f32 K/V within a bound derived from the format's
//      worst element error (kv_row_error_bound): with δ = scale · max‖q‖₁ · max|ΔK| the scores
//      move by at most δ, so the softmax weights by at most e^{2δ} − 1 in L1, and the output by
//      at most max|ΔV| + (e^{2δ} − 1) · max|V|.
// Slots no sequence may read keep NaN params, so reading one still fails the NaN check.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "attention_checks.h"
#include "attention_fixtures.h"
#include "kernels/ref/attention.h"
#include "inferlab/kv/kv_format.h"
#include "plugin_cases.h"

namespace inferlab::testing {
namespace {

// One side of a layer in a KV dtype, built from f32 rows [slots, n_kv_heads, head_dim].
struct QuantizedSide {
  KvDtype dtype = KvDtype::kF32;
  std::vector<unsigned char> codes;
  std::vector<float> params;
  std::vector<float> dequantized;  // what the format stands for; NaN where the input was NaN
  float max_error = 0;             // over the finite rows
  float max_abs = 0;               // max |x| over the finite rows
};

QuantizedSide quantize_side(KvDtype dtype, int g, const float* x, std::size_t rows, int d) {
  QuantizedSide s;
  s.dtype = dtype;
  const std::size_t cb = kv_code_bytes(dtype, d), pf = kv_param_floats(dtype, d, g);
  s.codes.assign(rows * cb, 0);
  s.params.assign(rows * pf, 0.0f);
  s.dequantized.assign(rows * static_cast<std::size_t>(d), 0.0f);
  for (std::size_t r = 0; r < rows && dtype == KvDtype::kF32; ++r)  // f32: only its magnitude
    for (int c = 0; c < d; ++c)
      if (std::isfinite(x[r * static_cast<std::size_t>(d) + static_cast<std::size_t>(c)]))
        s.max_abs = std::max(s.max_abs, std::fabs(x[r * static_cast<std::size_t>(d) + static_cast<std::size_t>(c)]));
  for (std::size_t r = 0; r < rows && dtype != KvDtype::kF32; ++r) {
    const float* row = x + r * static_cast<std::size_t>(d);
    float* deq = s.dequantized.data() + r * static_cast<std::size_t>(d);
    if (!std::isfinite(row[0])) {  // a poisoned slot stays poisoned in every format
      std::fill(s.params.begin() + static_cast<std::ptrdiff_t>(r * pf), s.params.begin() + static_cast<std::ptrdiff_t>((r + 1) * pf),
                std::numeric_limits<float>::quiet_NaN());
      std::fill(deq, deq + d, std::numeric_limits<float>::quiet_NaN());
      // f16 / bf16 have no params to poison: their codes carry the NaN.
      if (kv_dtype_half(dtype)) kv_quantize_row(dtype, g, row, d, s.codes.data() + r * cb, nullptr);
      continue;
    }
    kv_quantize_row(dtype, g, row, d, s.codes.data() + r * cb, s.params.data() + r * pf);
    kv_dequantize_row(dtype, g, s.codes.data() + r * cb, s.params.data() + r * pf, d, deq);
    s.max_error = std::max(s.max_error, kv_row_error_bound(dtype, g, row, d));
    for (int c = 0; c < d; ++c) s.max_abs = std::max(s.max_abs, std::fabs(row[c]));
  }
  return s;
}

class AttentionKvFormats : public ::testing::TestWithParam<PluginCase> {};

TEST_P(AttentionKvFormats, EveryKvFormatMatchesTheReference) {
  const PluginCase& c = GetParam();
  if (c.device != DeviceKind::kCpu) GTEST_SKIP() << "quantized KV is stored on the CPU only";
  const PluginDescriptor* d = &conformance_registry().find(c.kind, c.plugin);
  const auto reads = [&](KvDtype t) {
    return std::find(d->kv_dtypes.begin(), d->kv_dtypes.end(), t) != d->kv_dtypes.end();
  };
  if (d->kv_dtypes.size() <= 1 && reads(KvDtype::kF32)) GTEST_SKIP() << c.plugin << " reads f32 KV only";
  CpuDevice device(2);
  auto attention = conformance_registry().create_attention(c.plugin, resolve_case(c), device);

  for (const char* name : {"f16", "bf16", "int8", "int4", "int8-keys", "int4-keys", "int8-values", "int4-values"}) {
    KvFormat format;
    ASSERT_TRUE(parse_kv_dtypes(name, format));
    if (!reads(format.keys) || !reads(format.values)) continue;
    for (int g : {8, 16}) {  // head_dim 16: two groups, one group
      SCOPED_TRACE(std::string(name) + " g" + std::to_string(g));
      AttentionProblemSpec spec = problem_spec(mixed_step_shapes(), 7, {8, 2}, 900 + static_cast<std::uint64_t>(g));
      AttentionProblem problem(spec);
      const KvLayerView f32 = problem.kv();
      const std::size_t rows = static_cast<std::size_t>(f32.num_blocks) * f32.block_size * f32.n_kv_heads;
      const QuantizedSide k = quantize_side(format.keys, g, static_cast<const float*>(f32.k), rows, f32.head_dim);
      const QuantizedSide v = quantize_side(format.values, g, static_cast<const float*>(f32.v), rows, f32.head_dim);

      KvLayerView quant = f32;
      quant.k_dtype = format.keys;
      quant.v_dtype = format.values;
      quant.group_size = g;
      if (format.keys != KvDtype::kF32) quant.k = k.codes.data(), quant.k_params = k.params.data();
      if (format.values != KvDtype::kF32) quant.v = v.codes.data(), quant.v_params = v.params.data();
      std::vector<float> got(problem.out_size(), std::numeric_limits<float>::quiet_NaN());
      attention->forward(problem.batch(), quant, problem.q(), got.data(), device);
      ASSERT_EQ(count_non_finite(got), 0u) << "a poisoned slot was read or a row was not written";

      // 1. The reference on exactly what the format stores.
      KvLayerView deq = f32;
      if (format.keys != KvDtype::kF32) deq.k = k.dequantized.data();
      if (format.values != KvDtype::kF32) deq.v = v.dequantized.data();
      std::vector<float> want_deq(problem.out_size());
      ref::ref_paged_attention(problem.batch(), deq, problem.q(), want_deq.data());
      EXPECT_LT(max_relative_error(got, want_deq), 1e-5);

      // 2. The f32 reference within the format-derived bound (and really moved by it).
      const std::vector<float> want = reference_output(problem);
      float q_l1 = 0;
      const int hd = f32.head_dim;
      for (std::size_t r = 0; r < problem.out_size() / static_cast<std::size_t>(hd); ++r) {
        float l1 = 0;
        for (int i = 0; i < hd; ++i) l1 += std::fabs(problem.q()[r * static_cast<std::size_t>(hd) + static_cast<std::size_t>(i)]);
        q_l1 = std::max(q_l1, l1);
      }
      const double delta = problem.batch().scale * q_l1 * k.max_error;
      const double bound = v.max_error + std::expm1(2.0 * delta) * v.max_abs;
      double max_diff = 0;
      for (std::size_t i = 0; i < got.size(); ++i) max_diff = std::max(max_diff, std::fabs(static_cast<double>(got[i]) - want[i]));
      EXPECT_LE(max_diff, bound);
      EXPECT_GT(max_diff, 0.0) << "the output did not move: the quantized K/V were not read";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Plugins, AttentionKvFormats, ::testing::ValuesIn(default_plugin_cases(PluginKind::kAttention)),
                         case_name);
// `inferlab conformance LIB.so` instantiates only the suites of its plugins' kinds.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(AttentionKvFormats);

}  // namespace
}  // namespace inferlab::testing
