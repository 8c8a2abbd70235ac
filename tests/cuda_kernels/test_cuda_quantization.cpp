// The CUDA quantized linears (kernels/cuda/quant_linear.cu, quant_act.cu) through the int8,
// int4, gptq, awq and smoothquant plugins on a CudaDevice, against kernels/ref in double: the
// same codes (ref::quantize_int8_rows / quantize_int4_groups are deterministic) and, for int8
// activations, the same activation blocks (ref::quantize_act_rows). Rows 1 / 3 / 8 (GEMVs), 9 /
// 16 / 17 / 33 / 65 (tensor-core tiles where kernels/cuda/linear_plan.h picks them, else the
// CUDA-core GEMV and fused GEMM), odd in / out (partial groups and words). The output starts NaN.
// W4A16 / W8A16 on tensor cores split activations into two bf16 halves (16 significant bits):
// 1e-4. SmoothQuant's per-token W8A8 has no kernels/ref twin: the same linear's CPU path (itself
// tested against its definition) is the reference. Skipped without a CUDA device.
#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "attention_fixtures.h"
#include "cuda_test_support.h"
#include "inferlab/plugin/registry.h"
#include "inferlab/support/rng.h"
#include "kernels/ref/matmul_int4.h"
#include "kernels/ref/matmul_int8.h"
#include "test_support.h"

namespace inferlab::testing {
namespace {

struct Shape {
  int out, in;
};
constexpr Shape kShapes[] = {{37, 67}, {37, 128}, {64, 256}, {5, 96}, {130, 512}};
constexpr int kRows[] = {1, 3, 8, 9, 16, 17, 33, 65};

bool has(const Params& p, const std::string& name) { return p.values().count(name) > 0; }

std::vector<float> random_values(std::size_t n, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(rng.uniform() * 2.0 - 1.0);
  return v;
}

// What the kernels must compute: y [n, out] in double through kernels/ref, as floats.
using Reference = std::vector<float> (*)(const std::vector<float>& w, const std::vector<float>& x, int n, Shape s,
                                         const Params& p);

std::vector<float> ref_int8(const std::vector<float>& w, const std::vector<float>& x, int n, Shape s, const Params& p) {
  std::vector<std::int8_t> q(w.size());
  std::vector<float> scale(static_cast<std::size_t>(s.out)), y(static_cast<std::size_t>(n) * s.out);
  ref::quantize_int8_rows(w.data(), s.out, s.in, q.data(), scale.data());
  if (p.get_string("activations") == "int8") {
    std::vector<std::int8_t> xq(x.size());
    std::vector<float> xs(static_cast<std::size_t>(n) * ref::act_blocks(s.in));
    ref::quantize_act_rows(x.data(), n, s.in, xq.data(), xs.data());
    ref::matmul_int8_act(xq.data(), xs.data(), q.data(), scale.data(), y.data(), n, s.out, s.in);
  } else {
    ref::matmul_int8(x.data(), q.data(), scale.data(), y.data(), n, s.out, s.in);
  }
  return y;
}

// int4 groups by round to nearest (the int4 plugin; gptq and awq without calibration).
std::vector<float> ref_int4(const std::vector<float>& w, const std::vector<float>& x, int n, Shape s, const Params& p) {
  const int gs = static_cast<int>(p.get_int("group_size"));
  const bool symmetric = has(p, "symmetric") && p.get_bool("symmetric");
  // activations = auto (the default) is int8 where the groups hold whole 32-blocks
  // (plugins/common/quantization/int4_linear.cpp).
  const std::string acts = has(p, "activations") ? p.get_string("activations") : "fp32";
  const bool int8_acts = acts == "int8" || (acts == "auto" && gs % ref::kActBlock == 0);
  const std::size_t cells = static_cast<std::size_t>(s.out) * ref::int4_groups(s.in, gs);
  std::vector<std::uint8_t> packed(static_cast<std::size_t>(s.out) * ref::int4_row_bytes(s.in)), zero(cells);
  std::vector<float> scale(cells), y(static_cast<std::size_t>(n) * s.out);
  ref::quantize_int4_groups(w.data(), s.out, s.in, gs, packed.data(), scale.data(), symmetric ? nullptr : zero.data());
  const std::uint8_t* z = symmetric ? nullptr : zero.data();
  if (int8_acts) {
    std::vector<std::int8_t> xq(x.size());
    std::vector<float> xs(static_cast<std::size_t>(n) * ref::act_blocks(s.in));
    ref::quantize_act_rows(x.data(), n, s.in, xq.data(), xs.data());
    ref::matmul_int4_act(xq.data(), xs.data(), packed.data(), scale.data(), z, y.data(), n, s.out, s.in, gs);
  } else {
    ref::matmul_int4(x.data(), packed.data(), scale.data(), z, y.data(), n, s.out, s.in, gs);
  }
  return y;
}

struct Variant {
  std::string plugin;
  std::map<std::string, ParamValue> params;
  Reference reference;  // null: the linear's own CPU path
  double tolerance;     // max |got - want| / max |want|
};

const std::vector<Variant> kVariants = {
    {"int8", {}, ref_int8, 1e-4},  // W8A16: bf16 tiles (hi + lo activations) above 8 rows
    {"int8", {{"activations", std::string("int8")}}, ref_int8, 1e-5},
    {"int4", {}, ref_int4, 1e-5},  // auto: W4A8 at group 32
    {"int4", {{"activations", std::string("fp32")}}, ref_int4, 1e-4},
    {"int4", {{"activations", std::string("fp32")}, {"group_size", std::int64_t{128}}}, ref_int4, 1e-4},
    {"int4", {{"symmetric", true}, {"group_size", std::int64_t{8}}}, ref_int4, 1e-5},
    {"int4", {{"activations", std::string("int8")}, {"group_size", std::int64_t{64}}}, ref_int4, 1e-5},
    {"gptq", {}, ref_int4, 1e-5},  // no calibration: round to nearest, asymmetric
    {"awq", {}, ref_int4, 1e-5},   // likewise
    {"awq", {{"activations", std::string("fp32")}}, ref_int4, 1e-4},
    {"smoothquant", {}, nullptr, 1e-5},
    {"smoothquant", {{"quantize", false}}, nullptr, 1e-5},
};

double max_relative_error(const std::vector<float>& got, const std::vector<float>& want) {
  double err = 0, scale = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    err = std::max(err, std::fabs(static_cast<double>(got[i]) - want[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(want[i])));
  }
  return scale > 0 ? err / scale : err;
}

TEST(CudaQuantization, EveryLinearMatchesTheReferenceOnAwkwardShapes) {
  INFERLAB_REQUIRE_CUDA();
  const auto device = make_device(DeviceKind::kCuda, 1);
  const auto cpu = make_device(DeviceKind::kCpu, 2);
  const Registry registry({plugin_dir()});
  std::uint64_t seed = 9000;
  for (const Variant& v : kVariants) {
    const Params params = registry.resolve(PluginKind::kQuantization, v.plugin, v.params, "test");
    auto quant = registry.create_quantization(v.plugin, params, *device);
    for (Shape s : kShapes) {
      const std::vector<float> w = random_values(static_cast<std::size_t>(s.out) * s.in, ++seed);
      auto linear = quant->make_linear("layers.0.wq", w, s.out, s.in);
      for (int n : kRows) {
        SCOPED_TRACE(v.plugin + " #params " + std::to_string(v.params.size()) + ", out " + std::to_string(s.out) +
                     ", in " + std::to_string(s.in) + ", rows " + std::to_string(n));
        const std::vector<float> x = random_values(static_cast<std::size_t>(n) * s.in, ++seed);
        Buffer dx = to_device(*device, x);
        Buffer dy = to_device(*device, nan_filled(static_cast<std::size_t>(n) * s.out));
        linear->forward(dx.as<const float>(), dy.as<float>(), n, *device);
        const std::vector<float> got = to_host<float>(*device, dy, static_cast<std::size_t>(n) * s.out);
        std::vector<float> want(got.size());
        if (v.reference != nullptr) {
          want = v.reference(w, x, n, s, params);
        } else {
          linear->forward(x.data(), want.data(), n, *cpu);  // the host copy of the same weights
        }
        EXPECT_EQ(count_non_finite(got), 0u);
        EXPECT_LT(max_relative_error(got, want), v.tolerance);
      }
    }
  }
}

// AWQ with calibration (an AwqCudaLinear: s⁻¹ before the int4 layer) against the same linear's
// CPU path. With int8 activations s⁻¹ is folded into the GPU's activation quantisation; it once
// went through the device workspace the quantisation then overwrote (aliasing).
TEST(CudaQuantization, CalibratedAwqMatchesItsCpuPath) {
  INFERLAB_REQUIRE_CUDA();
  const auto device = make_device(DeviceKind::kCuda, 1);
  const auto cpu = make_device(DeviceKind::kCpu, 2);
  const Registry registry({plugin_dir()});
  const int out = 64, in = 256;
  const std::vector<float> w = random_values(static_cast<std::size_t>(out) * in, 77);
  LinearCalibration calib;
  calib.in = in;
  calib.tokens = 16;
  calib.sample_rows = 16;
  calib.samples = random_values(static_cast<std::size_t>(calib.sample_rows) * in, 78);
  calib.mean_abs.resize(static_cast<std::size_t>(in));
  calib.max_abs.resize(static_cast<std::size_t>(in));
  for (int i = 0; i < in; ++i) {  // uneven channels, so the search picks scales other than 1
    calib.mean_abs[static_cast<std::size_t>(i)] = 0.05f + static_cast<float>(i % 7);
    calib.max_abs[static_cast<std::size_t>(i)] = 2.0f * calib.mean_abs[static_cast<std::size_t>(i)];
  }
  for (const char* acts : {"auto", "fp32"}) {
    const std::map<std::string, ParamValue> values = {{"activations", std::string(acts)}};
    const Params params = registry.resolve(PluginKind::kQuantization, "awq", values, "test");
    auto on_gpu = registry.create_quantization("awq", params, *device)->make_linear("layers.0.wq", w, out, in, &calib);
    auto on_cpu = registry.create_quantization("awq", params, *cpu)->make_linear("layers.0.wq", w, out, in, &calib);
    for (int n : {1, 9, 33}) {
      SCOPED_TRACE(std::string("activations ") + acts + ", rows " + std::to_string(n));
      const std::vector<float> x = random_values(static_cast<std::size_t>(n) * in, 79 + static_cast<std::uint64_t>(n));
      Buffer dx = to_device(*device, x);
      Buffer dy = to_device(*device, nan_filled(static_cast<std::size_t>(n) * out));
      on_gpu->forward(dx.as<const float>(), dy.as<float>(), n, *device);
      const std::vector<float> got = to_host<float>(*device, dy, static_cast<std::size_t>(n) * out);
      std::vector<float> want(got.size());
      on_cpu->forward(x.data(), want.data(), n, *cpu);
      EXPECT_EQ(count_non_finite(got), 0u);
      EXPECT_LT(max_relative_error(got, want), std::string(acts) == "fp32" && n > 8 ? 1e-4 : 1e-5);
    }
  }
}

}  // namespace
}  // namespace inferlab::testing
