// quantization/gguf on synthetic blocks: native linears compute what the dequantised fp32 linear
// computes, float tensors take the fp32 path, and every bad input is refused with the
// tensor, its type and what is allowed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

#include "gguf_block_fixtures.h"
#include "gguf_linear.h"
#include "inferlab/device/device.h"
#include "inferlab/error.h"
#include "inferlab/plugin/registry.h"
#include "inferlab/support/rng.h"
#include "kernels/cpu/amx.h"
#include "plugins/common/quantization/float_linear.h"
#include "test_support.h"

namespace inferlab::plugins {
namespace {

using testing::error_of;

// A GGUF-like ModelWeights (one layer) holding one linear's blocks under `name`.
ModelWeights weights_with(const std::string& name, GgmlType type, std::vector<std::uint8_t> blocks) {
  ModelWeights w;
  w.layers.resize(1);
  w.config.source_linear_types[name] = static_cast<std::uint32_t>(type);
  if (ggml_type_is_quantized(type)) w.set_source_blocks(name, SourceBlocks{static_cast<std::uint32_t>(type), std::move(blocks)});
  return w;
}

std::vector<float> forward(const Linear& l, const std::vector<float>& x, int n) {
  CpuDevice device(2);
  std::vector<float> y(static_cast<std::size_t>(n) * l.out_features());
  l.forward(x.data(), y.data(), n, device);
  return y;
}

std::vector<float> gaussian(std::size_t count, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<float> v(count);
  for (float& f : v) f = static_cast<float>(rng.normal());
  return v;
}

// max |a - b| / max |b|
double relative_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0, m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    d = std::max(d, std::fabs(static_cast<double>(a[i]) - b[i]));
    m = std::max(m, std::fabs(static_cast<double>(b[i])));
  }
  return d / m;
}

// `key` = false (a parameter of the int8-activation path) is accepted with int8 activations and
// refused with fp32 ones, naming both keys, on a model whose one linear has GGML type `type`.
void expect_false_refused_with_fp32_activations(const std::string& key, int type) {
  Registry reg({testing::plugin_dir()});
  ModelConfig gguf_model;
  gguf_model.source_linear_types = {{"layers.0.wq", type}};
  for (const std::string acts : {"fp32", "int8"}) {
    const Params params = reg.resolve(PluginKind::kQuantization, "gguf",
                                      {{key, ParamValue(false)}, {"activations", ParamValue(acts)}}, "t");
    const auto reasons =
        reg.check_support(PluginKind::kQuantization, "gguf", SupportQuery{gguf_model, DeviceKind::kCpu, {}, params});
    if (acts == "int8") {
      EXPECT_TRUE(reasons.empty()) << key;
    } else {
      ASSERT_EQ(reasons.size(), 1u) << key;
      EXPECT_NE(reasons[0].find(key + " = false"), std::string::npos) << reasons[0];
      EXPECT_NE(reasons[0].find("activations"), std::string::npos) << reasons[0];
    }
  }
}

TEST(GgufQuantization, NativeLinearsComputeTheDequantizedLinear) {
  const int out = 24, in = 512, n = 5;
  for (GgmlType type : {GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ5_0, GgmlType::kQ5_1,
                        GgmlType::kIQ4_NL, GgmlType::kQ2_K, GgmlType::kQ3_K, GgmlType::kQ4_K, GgmlType::kQ5_K,
                        GgmlType::kQ6_K, GgmlType::kIQ4_XS})
    for (int variant = 0; variant < 3; ++variant) {  // fp32; int8; int8 with transcode = false
      const bool int8 = variant > 0, transcode = variant < 2;
      SCOPED_TRACE(ggml_type_name(static_cast<std::uint32_t>(type)) + (int8 ? " int8" : " fp32") +
                   (transcode ? "" : " transcode=false"));
      std::vector<std::uint8_t> blocks = testing::random_gguf_blocks(type, out, in, 7);
      std::vector<float> w(static_cast<std::size_t>(out) * in);
      dequantize(type, blocks.data(), w.size(), w.data());
      const ModelWeights weights = weights_with("layers.0.w1", type, blocks);
      GgufQuantization q(&weights, int8, true, transcode);
      std::unique_ptr<Linear> native = q.make_linear("layers.0.w1", w, out, in);
      const auto* block_linear = dynamic_cast<GgufBlockLinear*>(native.get());
      ASSERT_NE(block_linear, nullptr);
      // int8 activations on a build with the panels: the packed types, and Q5_0 / IQ4_NL as Q8_0
      // panels unless transcode = false.
      const bool transcoded = transcode && cpu::gguf_transcodes_to_q8_0(type);
      const bool packs = int8 && cpu::gemm_gguf_available() && (cpu::gemm_gguf_packs(type) || transcoded);
      EXPECT_EQ(block_linear->packed(), packs);
      // The file's bytes, no fp32 copy; packed: out padded to 32 rows, nothing else (Q4_K's and
      // Q5_K's packed 6-bit scales and mins held one byte each: 148 bytes per 144, 180 per 176).
      const std::uint64_t padded = ggml_tensor_bytes(transcoded ? GgmlType::kQ8_0 : type, std::uint64_t{32} * in);
      const std::uint64_t packed_bytes = type == GgmlType::kQ4_K   ? padded / 144 * 148
                                         : type == GgmlType::kQ5_K ? padded / 176 * 180
                                                                   : padded;
      EXPECT_EQ(native->weight_bytes(), packs ? packed_bytes : blocks.size());
      // The memory estimate's size, from the header's type alone: exact unpacked, within 37/36 above packed.
      const std::uint64_t planned = q.planned_bytes("layers.0.w1", out, in, weights.config);
      EXPECT_GE(planned, native->weight_bytes());
      EXPECT_LE(planned, packs ? (native->weight_bytes() * 37 + 35) / 36 : native->weight_bytes());
      std::vector<float> row(static_cast<std::size_t>(in));  // the last row, decoded (tied embedding)
      native->dequantize_row(out - 1, row.data());
      EXPECT_TRUE(std::equal(row.begin(), row.end(), w.begin() + static_cast<std::ptrdiff_t>(out - 1) * in));
      FloatLinear fp32(w, out, in);
      const std::vector<float> x = gaussian(static_cast<std::size_t>(n) * in, 8);
      // fp32 activations: rounding only; int8 blocks: the activation quantisation error (and it
      // did quantise).
      const double diff = relative_diff(forward(*native, x, n), forward(fp32, x, n));
      EXPECT_LT(diff, int8 ? 2e-2 : 1e-5);
      if (int8) {
        EXPECT_GT(diff, 1e-6);
      }
    }
}

// Q5_0 and IQ4_NL blocks are Q8_0 blocks (d, c with c in int8): transcoded into Q8_0 panels they
// run the same integer dot products as the row kernels on the file's bytes, so only the fp32
// accumulation order differs; dequantize_row is the file's values bit for bit (above).
TEST(GgufQuantization, TranscodedQ8_0PanelsGiveTheRowKernelsResults) {
  if (!cpu::gemm_gguf_available()) GTEST_SKIP() << "this build has neither AVX-512 VNNI nor AVX2: nothing is packed";
  const int out = 40, in = 576;  // SmolLM2's width; out not a multiple of the 32-row panel
  for (GgmlType type : {GgmlType::kQ5_0, GgmlType::kIQ4_NL}) {
    SCOPED_TRACE(ggml_type_name(static_cast<std::uint32_t>(type)));
    const std::vector<std::uint8_t> blocks = testing::random_gguf_blocks(type, out, in, 21);
    const ModelWeights weights = weights_with("layers.0.w1", type, blocks);
    GgufQuantization panels(&weights, true), rows(&weights, true, true, false);
    const auto a = panels.make_linear("layers.0.w1", {}, out, in), b = rows.make_linear("layers.0.w1", {}, out, in);
    ASSERT_TRUE(dynamic_cast<const GgufBlockLinear&>(*a).packed());
    ASSERT_FALSE(dynamic_cast<const GgufBlockLinear&>(*b).packed());
    EXPECT_EQ(dynamic_cast<const GgufBlockLinear&>(*a).type(), type);  // reports the file's type
    for (int n : {1, 7, 40}) {  // decode, the packed tiles, the unpacked prefill
      const std::vector<float> x = gaussian(static_cast<std::size_t>(n) * in, 30 + static_cast<std::uint64_t>(n));
      // From kGgufAmxMinRows rows the row kernels' side runs on the AMX bf16 tiles where they run
      // (matmul_gguf.h: fp32 sums to ~1e-5 of sum |x w|); without them, the same integer dots.
      const bool before = cpu::set_amx_bf16(false);
      EXPECT_LT(relative_diff(forward(*a, x, n), forward(*b, x, n)), 1e-6) << n << " rows";
      cpu::set_amx_bf16(before);
      EXPECT_LT(relative_diff(forward(*a, x, n), forward(*b, x, n)), 2e-5) << n << " rows, tiles where they run";
    }
  }
  EXPECT_THROW(cpu::transcode_to_q8_0(GgmlType::kQ4_0, std::vector<std::uint8_t>(18)), Error);
  EXPECT_THROW(cpu::transcode_to_q8_0(GgmlType::kQ5_0, std::vector<std::uint8_t>(23)), Error);  // not whole blocks
  // Through the registry: transcode = false with fp32 activations (where nothing is transcoded)
  // is refused, naming both keys.
  expect_false_refused_with_fp32_activations("transcode", 6 /* Q5_0 */);
}

TEST(GgufQuantization, FloatTensorsRunInFp32) {
  const int out = 4, in = 256;
  Rng rng(3);
  std::vector<float> w(static_cast<std::size_t>(out) * in);
  for (float& v : w) v = static_cast<float>(rng.normal());
  for (GgmlType type : {GgmlType::kF16, GgmlType::kBF16, GgmlType::kF32}) {
    const ModelWeights weights = weights_with("classifier", type, {});
    GgufQuantization q(&weights, false);
    std::unique_ptr<Linear> l = q.make_linear("classifier", w, out, in);
    EXPECT_EQ(l->weight_bytes(), 4u * out * in);
    const std::vector<float> x = gaussian(in, 4);
    EXPECT_EQ(forward(*l, x, 1), forward(FloatLinear(w, out, in), x, 1));
  }
}

TEST(GgufQuantization, RefusesModelsItCannotRunWithTheReason) {
  ModelConfig plain;  // not from a GGUF
  const auto not_gguf = gguf_strategy_problems(plain);
  ASSERT_EQ(not_gguf.size(), 1u);
  EXPECT_NE(not_gguf[0].find("not a GGUF checkpoint"), std::string::npos);

  ModelConfig iq2;
  iq2.source_linear_types = {{"layers.0.wq", 2 /* Q4_0 */}, {"layers.1.w2", 16 /* IQ2_XXS */}, {"classifier", 14}};
  const auto problems = gguf_strategy_problems(iq2);
  ASSERT_EQ(problems.size(), 1u);
  for (const char* part : {"layers.1.w2", "IQ2_XXS", "allowed: Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, Q2_K, Q3_K, Q4_K"})
    EXPECT_NE(problems[0].find(part), std::string::npos) << problems[0];

  // Through the registry, as validate asks.
  Registry reg({testing::plugin_dir()});
  const Params params = reg.resolve(PluginKind::kQuantization, "gguf", {}, "t");
  // Fast by default: int8-block activations (llama.cpp's arithmetic); fp32 is asked for by name.
  EXPECT_EQ(params.get_string("activations"), "int8");
  const auto reasons = reg.check_support(PluginKind::kQuantization, "gguf", SupportQuery{iq2, DeviceKind::kCpu, {}, params});
  ASSERT_EQ(reasons.size(), 1u);
  EXPECT_NE(reasons[0].find("layers.1.w2"), std::string::npos);
}

// `unpack = false` reaches each packed matrix (cpu::PackedGguf::unpack) and prefill then runs
// the packed tiles: the same bits as unpacked; it is refused where it would change nothing.
TEST(GgufQuantization, UnpackParameterReachesThePanelsAndKeepsTheBits) {
  if (!cpu::gemm_gguf_available()) GTEST_SKIP() << "this build has no gemm_gguf (neither AVX-512 VNNI nor AVX2)";
  const int out = 40, in = 512, n = 49;  // 49 rows: 8 full 6-row tiles, prefill unpacks
  const std::vector<float> x = gaussian(static_cast<std::size_t>(n) * in, 9);
  for (GgmlType type :
       {GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K}) {
    if (!cpu::gemm_gguf_packs(type)) continue;
    SCOPED_TRACE(ggml_type_name(static_cast<std::uint32_t>(type)));
    const std::vector<std::uint8_t> blocks = testing::random_gguf_blocks(type, out, in, 11);
    std::vector<float> w(static_cast<std::size_t>(out) * in);
    dequantize(type, blocks.data(), w.size(), w.data());
    const ModelWeights weights = weights_with("layers.0.w1", type, blocks);
    std::vector<std::vector<float>> ys;
    for (bool unpack : {true, false}) {
      GgufQuantization q(&weights, true, unpack);
      std::unique_ptr<Linear> l = q.make_linear("layers.0.w1", w, out, in);
      const auto* g = dynamic_cast<GgufBlockLinear*>(l.get());
      ASSERT_NE(g, nullptr);
      ASSERT_TRUE(g->packed());
      EXPECT_EQ(g->packed_panels().unpack, unpack);
      ys.push_back(forward(*l, x, n));
    }
    EXPECT_EQ(ys[0], ys[1]);
  }
  // Through the registry: unpack = false with fp32 activations is refused, naming both keys.
  expect_false_refused_with_fp32_activations("unpack", 2 /* Q4_0 */);
}

TEST(GgufQuantization, BadBlocksAndMissingBlocksAreErrors) {
  std::vector<std::uint8_t> blocks = testing::random_gguf_blocks(GgmlType::kQ4_K, 2, 256, 1);
  std::vector<float> w(512, 0.0f);
  // Wrong byte count, a row that is not whole blocks, a type with no kernel.
  std::vector<std::uint8_t> short_blocks(blocks.begin(), blocks.end() - 1);
  EXPECT_NE(error_of([&] { GgufBlockLinear(GgmlType::kQ4_K, short_blocks, 2, 256, false); }).find("a [2, 256] tensor has 288"),
            std::string::npos);
  EXPECT_NE(error_of([&] { GgufBlockLinear(GgmlType::kQ4_K, blocks, 4, 128, false); }).find("whole blocks of 256"),
            std::string::npos);
  EXPECT_NE(error_of([&] { GgufBlockLinear(GgmlType::kF16, blocks, 2, 256, false); }).find("no native kernel for F16"),
            std::string::npos);
  // The config says Q4_K but the weights carry no blocks; a model that is not a GGUF; a name
  // the GGUF has no tensor for.
  ModelWeights missing = weights_with("layers.0.wq", GgmlType::kQ4_K, blocks);
  missing.layers[0].blocks.clear();
  GgufQuantization q(&missing, false);
  EXPECT_NE(error_of([&] { q.make_linear("layers.0.wq", w, 2, 256); }).find("carry no such blocks"), std::string::npos);
  EXPECT_NE(error_of([&] { q.make_linear("layers.0.wk", w, 2, 256); }).find("no tensor for linear layers.0.wk"),
            std::string::npos);
  const ModelWeights plain;
  GgufQuantization q_plain(&plain, false);
  EXPECT_NE(error_of([&] { q_plain.make_linear("layers.0.wq", w, 2, 256); }).find("not a GGUF"), std::string::npos);
}

}  // namespace
}  // namespace inferlab::plugins
