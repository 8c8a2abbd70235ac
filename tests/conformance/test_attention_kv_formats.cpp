// Attention × KV format conformance: every registered attention plugin that declares a
// KV dtype besides f32 reads every KV format it declares (f16, bf16, int8, int4, keys-only,
// values-only) of an awkward paged problem: on the CPU all of them, on CUDA those its CUDA
// implementation declares and the CUDA KV storage holds (f16, bf16, int8 per token-head), the
// codes uploaded. Two checks per format:
//   1. against kernels/ref on the dequantized K/V (what the format stores) within the f32
//      tolerance: the plugin dequantizes with the shared routine and nothing else changes;
//   2. against kernels/ref on the original f32 K/V within a bound derived from the format's
//      worst element error (kv_row_error_bound): with δ = scale · max‖q‖₁ · max|ΔK| the scores
//      move by at most δ, so the softmax weights by at most e^{2δ} − 1 in L1, and the output by
//      at most max|ΔV| + (e^{2δ} − 1) · max|V|.
// Slots no sequence may read keep NaN params (f16 / bf16: NaN codes), so reading one still fails
// the NaN check.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "attention_checks.h"
#include "attention_fixtures.h"
#include "kernels/ref/attention.h"
#include "inferlab/kv/kv_format.h"
#include "inferlab/kv/kv_storage.h"
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

// Device memory holding a copy of host bytes (at least one byte).
template <class T>
Buffer upload_bytes(Device& device, const std::vector<T>& host) {
  Buffer b(device, std::max<std::size_t>(host.size() * sizeof(T), 1));
  if (!host.empty()) device.copy_to_device(b.data(), host.data(), host.size() * sizeof(T));
  return b;
}

// attention.forward on `device`: directly on the CPU; elsewhere with the batch arrays, q, the
// K/V codes and params of `kv` (host memory, codes `k_bytes` / `v_bytes` long, params
// `k_params` / `v_params` floats) uploaded, and `out` copied back.
void forward_on(Device& device, Attention& attention, const AttentionProblem& problem, const KvLayerView& kv,
                std::size_t k_bytes, std::size_t v_bytes, std::size_t k_params, std::size_t v_params,
                std::vector<float>& out) {
  const AttentionBatch hb = problem.batch();
  if (device.kind() == DeviceKind::kCpu) {
    attention.forward(hb, kv, problem.q(), out.data(), device);
    return;
  }
  const auto bytes = [](const void* p, std::size_t n) {
    const auto* c = static_cast<const unsigned char*>(p);
    return std::vector<unsigned char>(c, c + n);
  };
  const auto floats = [](const float* p, std::size_t n) { return p ? std::vector<float>(p, p + n) : std::vector<float>(); };
  Buffer qs = upload_bytes(device, std::vector<int>(hb.query_start.begin(), hb.query_start.end())),
         cl = upload_bytes(device, std::vector<int>(hb.context_len.begin(), hb.context_len.end())),
         bt = upload_bytes(device, std::vector<int>(hb.block_table.begin(), hb.block_table.end()));
  Buffer k = upload_bytes(device, bytes(kv.k, k_bytes)), v = upload_bytes(device, bytes(kv.v, v_bytes));
  Buffer kp = upload_bytes(device, floats(kv.k_params, k_params)), vp = upload_bytes(device, floats(kv.v_params, v_params));
  Buffer q = upload_bytes(device, std::vector<float>(problem.q(), problem.q() + problem.out_size()));
  Buffer o = upload_bytes(device, out);
  AttentionBatch db = hb;
  db.query_start = {qs.as<const int>(), hb.query_start.size()};
  db.context_len = {cl.as<const int>(), hb.context_len.size()};
  db.block_table = {bt.as<const int>(), hb.block_table.size()};
  KvLayerView dkv = kv;
  dkv.k = k.data();
  dkv.v = v.data();
  dkv.k_params = kv.k_params ? kp.as<const float>() : nullptr;
  dkv.v_params = kv.v_params ? vp.as<const float>() : nullptr;
  attention.forward(db, dkv, q.as<const float>(), o.as<float>(), device);
  device.synchronize();
  device.copy_to_host(out.data(), o.data(), out.size() * sizeof(float));
}

class AttentionKvFormats : public ::testing::TestWithParam<PluginCase> {};

// On the CPU every format the plugin declares; on another device those its implementation there
// declares (DeviceImpl::kv_dtypes) and that device's KV storage holds (kv_storage_problem: on
// cuda f16, bf16 and int8 with one scale per token-head).
TEST_P(AttentionKvFormats, EveryKvFormatMatchesTheReference) {
  const PluginCase& c = GetParam();
  const PluginDescriptor* d = &conformance_registry().find(c.kind, c.plugin);
  const auto impl = d->devices.find(c.device);
  const std::vector<KvDtype>& dtypes =
      impl != d->devices.end() && !impl->second.kv_dtypes.empty() ? impl->second.kv_dtypes : d->kv_dtypes;
  const auto reads = [&](KvDtype t) { return std::find(dtypes.begin(), dtypes.end(), t) != dtypes.end(); };
  if (dtypes.size() <= 1 && reads(KvDtype::kF32)) GTEST_SKIP() << c.plugin << " reads f32 KV only";
  std::string why;
  std::unique_ptr<Device> device = open_device(c.device, why);
  if (!device) GTEST_SKIP() << why;
  auto attention = conformance_registry().create_attention(c.plugin, resolve_case(c), *device);
  ModelConfig shape;  // the problem's heads, for the storage rule
  shape.name = "conformance";
  shape.n_heads = 8;
  shape.n_kv_heads = 2;
  shape.dim = 8 * 16;
  shape.hidden_dim = 2 * shape.dim;
  shape.n_layers = 1;
  shape.vocab_size = 64;

  int checked = 0;
  for (const char* name : {"f16", "bf16", "int8", "int4", "int8-keys", "int4-keys", "int8-values", "int4-values"}) {
    KvFormat format;
    ASSERT_TRUE(parse_kv_dtypes(name, format));
    if (!reads(format.keys) || !reads(format.values)) continue;
    for (int g : {8, 16}) {  // head_dim 16: two groups, one group
      format.group_size = g;
      if (!format.quantized() && g != 8) continue;  // f16 / bf16: nothing grouped, one pass
      if (!kv_storage_problem(format, shape, c.device).empty()) continue;
      ++checked;
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
      const std::size_t f32_bytes = rows * static_cast<std::size_t>(f32.head_dim) * sizeof(float);
      forward_on(*device, *attention, problem, quant, format.keys != KvDtype::kF32 ? k.codes.size() : f32_bytes,
                 format.values != KvDtype::kF32 ? v.codes.size() : f32_bytes, k.params.size(), v.params.size(), got);
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
  EXPECT_GT(checked, 0) << "no KV format of " << c.plugin << " is stored on this device";
}

INSTANTIATE_TEST_SUITE_P(Plugins, AttentionKvFormats, ::testing::ValuesIn(default_plugin_cases(PluginKind::kAttention)),
                         case_name);
// `inferlab conformance LIB.so` instantiates only the suites of its plugins' kinds.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(AttentionKvFormats);

}  // namespace
}  // namespace inferlab::testing
