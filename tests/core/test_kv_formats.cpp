// KV cache formats (kv_format.h): f16 / bf16 rounding and storage, the storage rule per device,
// int8 and int4 group-wise quantise/dequantise error, keys-only
// and values-only storage, f32 layers, bytes per token and blocks at a fixed budget, the [kv]
// configuration and its refusals, and the cost in perplexity on SmolLM2.
#include <cmath>
#include <cstring>
#include <limits>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "format_writers.h"
#include "inferlab/engine/engine.h"
#include "inferlab/error.h"
#include "inferlab/experiment/experiment.h"
#include "inferlab/experiment/experiment_toml.h"
#include "inferlab/formats/formats.h"
#include "inferlab/ggml_types.h"
#include "inferlab/kv/kv_storage.h"
#include "inferlab/model/model_config.h"
#include "inferlab/paged_kv.h"
#include "inferlab/results/quality.h"
#include "inferlab/plugin/registry.h"
#include "inferlab/support/rng.h"
#include "inferlab/run/runner.h"
#include "model_fixtures.h"
#include "test_support.h"

namespace inferlab {
namespace {

ModelConfig smollm2_shape() {
  ModelConfig c{.name = "smollm2-shape", .dim = 576, .hidden_dim = 1536, .n_layers = 30, .n_heads = 9, .n_kv_heads = 3,
                .vocab_size = 49152};
  return c;
}

KvFormat format(const char* dtypes, int group = 32, int first = 0, int last = 0) {
  KvFormat f;
  EXPECT_TRUE(parse_kv_dtypes(dtypes, f)) << dtypes;
  f.group_size = group;
  f.f32_first_layers = first;
  f.f32_last_layers = last;
  return f;
}

// kv_dequantize_row's vector loops give every value the scalar rule's bits: int8 s * q, int4
// lo + s * q in one rounding where the build has FMA (two without), f16 / bf16 widened exactly;
// rows of whole groups of 8, groups with tails (12, 20) and a row shorter than a vector.
TEST(KvFormats, DequantiseRowGivesTheScalarRuleBitForBit) {
  Rng rng(11);
  for (const int d : {64, 40, 24, 6}) {
    for (const int g : {d, d / 2}) {
      if (g % 2 != 0) continue;
      for (const KvDtype dtype : {KvDtype::kInt8, KvDtype::kInt4, KvDtype::kF16, KvDtype::kBf16}) {
        std::vector<unsigned char> codes(kv_code_bytes(dtype, d));
        for (auto& b : codes) b = static_cast<unsigned char>(rng.next_u64() & 0xFF);
        if (kv_dtype_half(dtype))  // finite halves only: clear each value's exponent top bit
          for (std::size_t i = 1; i < codes.size(); i += 2) codes[i] &= 0xBF;
        std::vector<float> params(std::max<std::size_t>(kv_param_floats(dtype, d, g), 1));
        for (auto& p : params) p = static_cast<float>(rng.uniform() * 2.0 - 0.5);
        std::vector<float> got(static_cast<std::size_t>(d), -1.0f), want(static_cast<std::size_t>(d));
        kv_dequantize_row(dtype, g, codes.data(), params.data(), d, got.data());
        for (int c = 0; c < d; ++c) {
          const int gi = c / g;
          float w = 0.0f;
          if (dtype == KvDtype::kInt8) {
            w = params[static_cast<std::size_t>(gi)] * static_cast<float>(static_cast<signed char>(codes[static_cast<std::size_t>(c)]));
          } else if (dtype == KvDtype::kInt4) {
            const int q = (codes[static_cast<std::size_t>(c / 2)] >> (4 * (c % 2))) & 0x0F;
            const float s = params[static_cast<std::size_t>(2 * gi)], lo = params[static_cast<std::size_t>(2 * gi + 1)];
#if defined(__FMA__)
            w = std::fma(s, static_cast<float>(q), lo);
#else
            w = lo + s * static_cast<float>(q);
#endif
          } else {
            std::uint16_t h;
            std::memcpy(&h, codes.data() + 2 * c, 2);
            w = dtype == KvDtype::kF16 ? fp16_to_fp32(h) : bf16_to_fp32(h);
          }
          want[static_cast<std::size_t>(c)] = w;
        }
        EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0)
            << kv_dtype_name(dtype) << " d " << d << " g " << g;
      }
    }
  }
}

// Rows with an outlier channel (as keys have): every element comes back within half a step of
// its group, the step being range / 15 (int4) or max|x| / 127 (int8), and int4 really is coarser.
TEST(KvFormats, QuantiseDequantiseErrorWithinHalfAStepOfTheGroup) {
  Rng rng(5);
  for (int d : {8, 64, 128})
    for (int g : {8, 32, 64}) {
      if (d % g != 0) continue;
      std::vector<float> x(static_cast<std::size_t>(d)), back(x.size());
      std::vector<unsigned char> codes(static_cast<std::size_t>(d));
      std::vector<float> params(2 * static_cast<std::size_t>(d / g));
      for (int trial = 0; trial < 20; ++trial) {
        for (float& v : x) v = static_cast<float>(rng.normal());
        x[static_cast<std::size_t>(trial % d)] *= 30.0f;  // an outlier channel
        double worst[2] = {0, 0};
        for (KvDtype t : {KvDtype::kInt8, KvDtype::kInt4}) {
          kv_quantize_row(t, g, x.data(), d, codes.data(), params.data());
          kv_dequantize_row(t, g, codes.data(), params.data(), d, back.data());
          const float bound = kv_row_error_bound(t, g, x.data(), d);
          for (int c = 0; c < d; ++c) {
            const double err = std::fabs(static_cast<double>(back[c]) - x[c]);
            EXPECT_LE(err, bound * (1 + 1e-5) + 1e-6) << kv_dtype_name(t) << " d " << d << " g " << g << " c " << c;
            worst[t == KvDtype::kInt4] = std::max(worst[t == KvDtype::kInt4], err);
          }
          // The bound is the format's: half of (range / 15) or (max|x| / 127) of the worst group.
          float lo = x[0], hi = x[0], amax = 0;
          for (float v : x) lo = std::min(lo, v), hi = std::max(hi, v), amax = std::max(amax, std::fabs(v));
          EXPECT_LE(bound, t == KvDtype::kInt4 ? 0.5f * (hi - lo) / 15.0f * 1.0001f : 0.5f * amax / 127.0f * 1.0001f);
        }
        EXPECT_GT(worst[1], worst[0]);  // int4 is coarser than int8
      }
    }
}

// keys-only: the V side is f32 storage, bit-identical to what was written; K comes back
// quantized (close, not equal). values-only: the mirror image. f32 layers store both exactly.
TEST(KvFormats, OneSidedFormatsLeaveTheOtherSideBitIdentical) {
  const ModelConfig c = preset_config("stories260k");  // 5 layers, 8 heads / 4 KV heads, head_dim 8
  CpuDevice device(1);
  const int kv_dim = c.kv_dim(), rows = 5;
  Rng rng(11);
  std::vector<float> k(static_cast<std::size_t>(rows * kv_dim)), v(k.size());
  for (float& x : k) x = static_cast<float>(rng.normal());
  for (float& x : v) x = static_cast<float>(rng.normal());
  const int slots[rows] = {3, 17, 0, 31, 8};
  std::vector<float> scratch(static_cast<std::size_t>(c.head_dim()));
  for (const char* name : {"int4-keys", "int8-keys", "int4-values", "int8-values", "int4"}) {
    SCOPED_TRACE(name);
    const KvFormat f = format(name, 8, 1, 1);
    KvStorage kv(device, c, 4, 8, f);
    for (int l = 0; l < c.n_layers; ++l) kv.write(l, k.data(), v.data(), slots, rows);
    for (int l = 0; l < c.n_layers; ++l) {
      const KvLayerView view = kv.layer(l);
      const bool f32_layer = l == 0 || l == c.n_layers - 1;
      EXPECT_EQ(view.k_dtype, f32_layer ? KvDtype::kF32 : f.keys) << l;
      EXPECT_EQ(view.v_dtype, f32_layer ? KvDtype::kF32 : f.values) << l;
      for (int r = 0; r < rows; ++r)
        for (int h = 0; h < c.n_kv_heads; ++h) {
          const std::size_t at = static_cast<std::size_t>(r * kv_dim + h * c.head_dim());
          const float* kr = view.k_row(slots[r], h, scratch.data());
          const bool k_same = std::memcmp(kr, k.data() + at, sizeof(float) * scratch.size()) == 0;
          const float* vr = view.v_row(slots[r], h, scratch.data());
          const bool v_same = std::memcmp(vr, v.data() + at, sizeof(float) * scratch.size()) == 0;
          EXPECT_EQ(k_same, view.k_dtype == KvDtype::kF32) << "layer " << l << " row " << r << " head " << h;
          EXPECT_EQ(v_same, view.v_dtype == KvDtype::kF32) << "layer " << l << " row " << r << " head " << h;
        }
    }
  }
}

// f32_layer hands out a layer's caches only when both sides are f32 (the fused RoPE + KV write
// stores there): the f32 first layer of a mixed format, not its int8 ones.
TEST(KvFormats, F32LayerOnlyForLayersStoredInF32) {
  const ModelConfig c = preset_config("stories260k");
  CpuDevice device(1);
  KvStorage kv(device, c, 3, 4, format("int8", 8, 1, 0));
  float *k = nullptr, *v = nullptr;
  ASSERT_TRUE(kv.f32_layer(0, k, v));
  EXPECT_EQ(k, kv.k_slot(0, 0));
  EXPECT_EQ(v, kv.v_slot(0, 0));
  float* untouched = k;
  EXPECT_FALSE(kv.f32_layer(1, k, v));
  EXPECT_EQ(k, untouched);
  EXPECT_THROW(kv.f32_layer(c.n_layers, k, v), Error);
}

// Copy on write copies a quantized block's codes and scales: the copy reads back the same values.
TEST(KvFormats, CopyOnWriteCopiesCodesAndScales) {
  const ModelConfig c = preset_config("stories260k");
  CpuDevice device(1);
  KvStorage kv(device, c, 3, 4, format("int4", 4));
  std::vector<float> k(static_cast<std::size_t>(c.kv_dim())), v(k.size());
  for (std::size_t i = 0; i < k.size(); ++i) k[i] = static_cast<float>(i) * 0.25f, v[i] = -static_cast<float>(i);
  const int slot = 1 * 4 + 2;
  for (int l = 0; l < c.n_layers; ++l) kv.write(l, k.data(), v.data(), &slot, 1);
  const BlockCopy copy{1, 2};
  kv.copy_blocks({&copy, 1});
  std::vector<float> a(static_cast<std::size_t>(c.head_dim())), b(a.size());
  for (int l = 0; l < c.n_layers; ++l)
    for (int h = 0; h < c.n_kv_heads; ++h) {
      const KvLayerView view = kv.layer(l);
      const float* x = view.v_row(slot, h, a.data());
      const float* y = view.v_row(2 * 4 + 2, h, b.data());
      EXPECT_EQ(std::memcmp(x, y, sizeof(float) * a.size()), 0) << l << " " << h;
      EXPECT_NE(x[1], 0.0f);
    }
}

// Bytes per token on SmolLM2's shape and what a 64 MiB budget holds in blocks of 16 tokens.
TEST(KvFormats, BytesPerTokenAndBlocksAtAFixedBudget) {
  const ModelConfig c = smollm2_shape();  // 30 layers, 3 KV heads, head_dim 64
  struct Row {
    KvFormat f;
    std::uint64_t bytes, blocks;
  };
  const Row rows[] = {
      {KvFormat{}, 46080, 91},                  // 2·30·192·4
      {format("int8", 0), 12240, 342},          // one scale per token-head: 3.76x the tokens
      {format("int8", 32), 12960, 323},         // g32: 3.56x
      {format("int8", 16), 14400, 291},         // g16 (within +0.05 perplexity): 3.2x
      {format("int4", 32), 8640, 485},          // 2·30·3·(32 + 2·2·4): 5.33x
      {format("int4-keys", 32), 27360, 153},    // 30·3·(256 + 48): 1.68x
      {format("int8-values", 32), 29520, 142},  // 30·3·(256 + 72)
      {format("int4", 32, 1, 1), 11136, 376},   // first and last layer in f32: 4.14x
  };
  const std::uint64_t budget = 64ull << 20;
  for (const Row& r : rows) {
    EXPECT_EQ(KvStorage::bytes_per_token(c, r.f), r.bytes) << r.f.name();
    EXPECT_EQ(budget / (r.bytes * 16), r.blocks) << r.f.name();
  }
  CpuDevice device(1);
  const ModelConfig s = preset_config("stories260k");
  for (const Row& r : {Row{format("int4", 8), 0, 0}, Row{format("int8-keys", 0, 2, 0), 0, 0}}) {
    KvStorage small(device, s, 4, 16, r.f);
    EXPECT_EQ(small.bytes(), 64u * KvStorage::bytes_per_token(s, r.f)) << r.f.name();
  }
}

// kv.memory_mb sizes the pool: the engine's kv_blocks_total is the budget over the format's
// bytes per block, so int4 holds more blocks than f32 in the same memory.
TEST(KvFormats, MemoryBudgetGivesMoreBlocksToSmallerFormats) {
  const ModelConfig c = preset_config("stories260k");
  const ModelWeights w = random_weights(c, 3);
  CpuDevice device(1);
  Registry reg({testing::plugin_dir()});
  auto att = reg.create_attention("flash", reg.resolve(PluginKind::kAttention, "flash", {}, "t"), device);
  auto sched = reg.create_scheduler("continuous", reg.resolve(PluginKind::kScheduling, "continuous", {}, "t"), device);
  auto dec = reg.create_decoder("sampling", reg.resolve(PluginKind::kDecoding, "sampling", {}, "t"), device);
  testing::FloatQuantization quant;
  Model model(w, quant, device);
  std::vector<Request> requests(1);
  requests[0].prompt = {1, 5, 9, 2};
  requests[0].max_output = 3;
  int blocks[2] = {0, 0};
  int i = 0;
  for (const KvFormat& f : {KvFormat{}, format("int4", 8)}) {
    ModelExecutor executor(model, *att, f);
    EngineOptions eo;
    eo.kv.block_size = 16;
    eo.kv.memory_mb = 1;
    blocks[i++] = Engine(executor, *sched, *dec, eo).run(requests).timeline.kv_blocks_total;
    EXPECT_EQ(static_cast<std::uint64_t>(blocks[i - 1]), (1ull << 20) / (KvStorage::bytes_per_token(c, f) * 16));
  }
  // stories260k: 5 layers, 4 KV heads, head_dim 8: f32 1280 bytes per token, int4 g8 2·5·4·(4 + 8) = 480.
  EXPECT_EQ(blocks[0], 51);
  EXPECT_EQ(blocks[1], 136);
}

// The [kv] keys: a bad dtype is refused where it is written, with the allowed names; a group
// size that does not divide head_dim is refused at planning with the table's file:line; the
// resolved config lists the format.
TEST(KvFormats, ConfigurationAndRefusals) {
  testing::TempDir dir("kv_formats_cfg");
  const std::string path = dir.file("exp.toml");
  testing::write_file(path, "[model]\npreset = \"stories260k\"\n[[variant]]\nname = \"q\"\nkv = { dtype = \"int3\" }\n");
  try {
    load_experiment(path, {});
    ADD_FAILURE() << "int3 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path + ":5:"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("int4-keys"), std::string::npos) << e.what();
  }
  testing::write_file(path, "[model]\npreset = \"stories260k\"\n[[variant]]\nname = \"q\"\n"
                            "kv = { dtype = \"int4\", group_size = 6 }\n");
  Registry registry({testing::plugin_dir()});
  ExperimentSpec spec = load_experiment(path, {});
  const ModelConfig c = experiment_model_config(spec.model);
  try {
    plan_experiment(spec, registry, c);
    ADD_FAILURE() << "group 6 accepted for head_dim 8";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path + ":5:"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("divide head_dim 8"), std::string::npos) << e.what();
  }
  testing::write_file(path, "[model]\npreset = \"stories260k\"\n[baseline]\nkv = { num_blocks = 9 }\n[[variant]]\n"
                            "name = \"q\"\nkv = { memory_mb = 4 }\n");
  EXPECT_THROW(load_experiment(path, {}), Error);  // two sizes for one pool
  testing::write_file(path, "[model]\npreset = \"stories260k\"\n[[variant]]\nname = \"q\"\nkv = { group_size = 8 }\n");
  try {  // a group size for an f32 cache would be parsed and ignored
    load_experiment(path, {});
    ADD_FAILURE() << "group_size without a quantized dtype accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path + ":5:"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("kv.dtype is f32"), std::string::npos) << e.what();
  }
  testing::write_file(path, "[model]\npreset = \"stories260k\"\n[[variant]]\nname = \"q\"\n"
                            "kv = { dtype = \"int4-keys\", group_size = 8, f32_last_layers = 1 }\n");
  spec = load_experiment(path, {});
  const Plan plan = plan_experiment(spec, registry, c);
  EXPECT_NE(resolved_config_toml(plan).find("dtype = \"int4-keys\", group_size = 8, f32_first_layers = 0, "
                                            "f32_last_layers = 1"),
            std::string::npos);
  // An attention plugin is refused a format it cannot read, with the reason (the one-pass test
  // plugin declares f32, int8 and int4 only).
  Registry with_onepass({testing::plugin_dir(), testing::binary_dir() + "/test_plugins/onepass"});
  const Params p = with_onepass.resolve(PluginKind::kAttention, "onepass", {}, "t");
  KvFormat f16(KvDtype::kF16);
  const auto reasons =
      with_onepass.check_support(PluginKind::kAttention, "onepass", SupportQuery{c, DeviceKind::kCpu, f16, p});
  ASSERT_EQ(reasons.size(), 1u);
  EXPECT_NE(reasons[0].find("cannot read KV cache stored as f16"), std::string::npos) << reasons[0];
  // f16 / bf16 take no group size (it would be parsed and ignored); f32 layers they do take.
  testing::write_file(path, "[model]\npreset = \"stories260k\"\n[[variant]]\nname = \"q\"\n"
                            "kv = { dtype = \"bf16\", group_size = 8 }\n");
  try {
    load_experiment(path, {});
    ADD_FAILURE() << "group_size with bf16 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path + ":5:"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("kv.dtype is bf16"), std::string::npos) << e.what();
  }
  testing::write_file(path, "[model]\npreset = \"stories260k\"\n[[variant]]\nname = \"q\"\n"
                            "kv = { dtype = \"f16\", f32_first_layers = 1 }\n");
  spec = load_experiment(path, {});
  const std::string toml = resolved_config_toml(plan_experiment(spec, registry, c));
  EXPECT_NE(toml.find("dtype = \"f16\", f32_first_layers = 1, f32_last_layers = 0"), std::string::npos) << toml;
}

// f16 / bf16 rows: each value rounded to nearest even (bit-exact against the half conversions),
// within kv_row_error_bound (half an ulp of the row's largest value), NaN kept, no params; and a
// KvStorage of either format on the CPU stores exactly those codes and reads them back.
TEST(KvFormats, HalfFormatsRoundEachValueAndStoreOnTheCpu) {
  Rng rng(11);
  const int d = 40;
  std::vector<float> x(d);
  for (int i = 0; i < d; ++i) x[static_cast<std::size_t>(i)] = static_cast<float>(rng.normal()) * (i == 3 ? 300.0f : 1.0f);
  x[7] = 1e-6f;  // an f16 subnormal
  for (KvDtype t : {KvDtype::kF16, KvDtype::kBf16}) {
    SCOPED_TRACE(kv_dtype_name(t));
    EXPECT_EQ(kv_code_bytes(t, d), 2u * d);
    EXPECT_EQ(kv_param_floats(t, d, 8), 0u);
    std::vector<std::uint16_t> codes(d);
    std::vector<float> back(d);
    kv_quantize_row(t, 8, x.data(), d, codes.data(), nullptr);
    kv_dequantize_row(t, 8, codes.data(), nullptr, d, back.data());
    const float bound = kv_row_error_bound(t, 8, x.data(), d);
    float worst = 0.0f;
    for (int i = 0; i < d; ++i) {
      const std::size_t u = static_cast<std::size_t>(i);
      EXPECT_EQ(codes[u], t == KvDtype::kF16 ? fp32_to_fp16(x[u]) : fp32_to_bf16(x[u])) << i;
      worst = std::max(worst, std::fabs(back[u] - x[u]));
    }
    EXPECT_LE(worst, bound);
    EXPECT_GT(worst, 0.0f);  // really rounded
    EXPECT_GT(bound, worst * 0.25f);  // and the bound is not vacuous
    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::uint16_t nan_code = 0;
    float nan_back = 0.0f;
    kv_quantize_row(t, 1, &nan, 1, &nan_code, nullptr);
    kv_dequantize_row(t, 1, &nan_code, nullptr, 1, &nan_back);
    EXPECT_TRUE(std::isnan(nan_back));

    CpuDevice device(1);
    ModelConfig c{.name = "t", .dim = 80, .hidden_dim = 8, .n_layers = 2, .n_heads = 4, .n_kv_heads = 2, .vocab_size = 4};
    KvStorage kv(device, c, 3, 4, KvFormat(t));
    const int slot = 9;
    kv.write(1, x.data(), x.data(), &slot, 1);  // kv_dim 40: one row
    const KvLayerView view = kv.layer(1);
    EXPECT_EQ(view.k_dtype, t);
    EXPECT_EQ(view.k_params, nullptr);
    EXPECT_EQ(std::memcmp(static_cast<const char*>(view.v) + slot * 2 * d, codes.data(), 2 * d), 0);
    std::vector<float> scratch(20);
    const float* head1 = view.k_row(slot, 1, scratch.data());
    for (int i = 0; i < 20; ++i) EXPECT_EQ(head1[i], back[static_cast<std::size_t>(20 + i)]) << i;
  }
  KvFormat f;
  EXPECT_TRUE(parse_kv_dtypes("bf16", f));
  EXPECT_EQ(f.name(), "bf16");  // no group size: nothing is grouped
  EXPECT_EQ(kv_bytes_per_token(smollm2_shape(), f), 2u * 30 * 192 * 2);
}

// Each device stores what its KV storage holds: any format on the CPU; on CUDA f32, f16 or bf16
// on both sides (kv_write_half), or int8 with one scale per token-head on every layer (what
// kv_write_int8 writes and the CUDA attention plugins read); the simulator f32. The planner asks the same rule, naming the variant's line.
TEST(KvFormats, EachDeviceStoresItsOwnFormats) {
  const ModelConfig m = smollm2_shape();  // head_dim 64
  for (const char* d : {"int8", "int4", "int4-keys"}) EXPECT_EQ(kv_storage_problem(format(d), m, DeviceKind::kCpu), "");
  EXPECT_EQ(kv_storage_problem(format("f32", 0), m, DeviceKind::kCuda), "");
  EXPECT_EQ(kv_storage_problem(format("int8", 0), m, DeviceKind::kCuda), "");
  EXPECT_EQ(kv_storage_problem(format("int8", 64), m, DeviceKind::kCuda), "");
  // f16 / bf16 on both sides, layers kept in f32 or not (each layer is written and read by itself).
  for (const char* d : {"f16", "bf16"}) {
    EXPECT_EQ(kv_storage_problem(format(d), m, DeviceKind::kCuda), "") << d;
    EXPECT_EQ(kv_storage_problem(format(d, 32, 1, 2), m, DeviceKind::kCuda), "") << d;
    EXPECT_NE(kv_storage_problem(format(d), m, DeviceKind::kSim).find("(allowed there: f32)"), std::string::npos);
  }
  KvFormat mixed_halves = format("f16");  // no [kv] dtype names it; the rule still refuses it
  mixed_halves.values = KvDtype::kBf16;
  for (const KvFormat& bad :
       {format("int8", 32), format("int4", 0), format("int8-keys", 0), format("int8", 0, 1), mixed_halves}) {
    const std::string why = kv_storage_problem(bad, m, DeviceKind::kCuda);
    EXPECT_NE(why.find("no storage on device 'cuda'"), std::string::npos) << bad.name();
    EXPECT_NE(why.find("allowed there: f32; f16 or bf16 on both sides"), std::string::npos) << why;
    EXPECT_NE(why.find("group_size 0 or head_dim 64"), std::string::npos) << why;
    EXPECT_NE(why.find("not stored on cuda: int4, one-sided formats, int8 in groups or beside f32 layers"),
              std::string::npos)
        << why;
  }
  EXPECT_NE(kv_storage_problem(format("int8", 0), m, DeviceKind::kSim).find("(allowed there: f32)"), std::string::npos);
  EXPECT_EQ(kv_storage_problem(format("f32", 0), m, DeviceKind::kSim), "");

  testing::TempDir dir("kv_formats_device");
  const std::string path = dir.file("exp.toml");
  testing::write_file(path, "[model]\npreset = \"stories260k\"\n[device]\nkind = \"sim\"\n[[variant]]\nname = \"q\"\n"
                            "kv = { dtype = \"int8\", group_size = 8 }\n");
  Registry registry({testing::plugin_dir()});
  const ExperimentSpec spec = load_experiment(path, {});
  try {
    plan_experiment(spec, registry, experiment_model_config(spec.model));
    ADD_FAILURE() << "int8 KV accepted on the simulated device";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path + ":7:"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("variant 'q'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("device 'sim'"), std::string::npos) << e.what();
  }
}

// Every built-in attention plugin reads int4 KV inside a model: the same log-probs from each
// (they dequantize the same codes with the same routine), close to the f32-KV ones.
TEST(KvFormats, EveryAttentionPluginReadsInt4InTheModel) {
  const ModelConfig c = preset_config("stories260k");
  const ModelWeights w = random_weights(c, 9);
  testing::FloatQuantization quant;
  CpuDevice device(2);
  Model model(w, quant, device);
  std::vector<int> tokens;
  for (int i = 0; i < 70; ++i) tokens.push_back(1 + (i * 13) % (c.vocab_size - 1));
  Registry reg({testing::plugin_dir()});
  std::vector<std::vector<float>> f32, first;
  testing::RefAttention ref;
  evaluate_perplexity(model, ref, tokens, 0, 0, &f32);
  for (const char* name : {"naive", "flash", "split_k"}) {
    auto att = reg.create_attention(name, reg.resolve(PluginKind::kAttention, name, {}, "test"), device);
    std::vector<std::vector<float>> lp;
    evaluate_perplexity(model, *att, tokens, 0, 0, &lp, format("int4", 8));
    ASSERT_EQ(lp.size(), f32.size());
    if (first.empty()) first = lp;
    double max_vs_f32 = 0, max_vs_first = 0;
    for (std::size_t t = 0; t < lp.size(); ++t)
      for (std::size_t i = 0; i < lp[t].size(); ++i) {
        ASSERT_TRUE(std::isfinite(lp[t][i]));
        max_vs_f32 = std::max(max_vs_f32, static_cast<double>(std::fabs(lp[t][i] - f32[t][i])));
        max_vs_first = std::max(max_vs_first, static_cast<double>(std::fabs(lp[t][i] - first[t][i])));
      }
    EXPECT_LT(max_vs_first, 1e-3) << name;
    EXPECT_LT(max_vs_f32, 0.5) << name;
    EXPECT_GT(max_vs_f32, 0.0) << name;  // it really read int4
  }
}

// The bound: KV int8 within +0.05 perplexity of f32 KV on SmolLM2, with one scale per 16
// values of head_dim (the experiment's kv-int8 row). Keys carry nearly all the error; finer key
// groups isolate the outlier channels (KL 0.00038 at g16 against 0.00071 with one scale per
// token-head over eval.txt). One scale per token-head is printed beside it; on 128 tokens it moved
// -0.045 and g32 +0.18 (noise at this KL: the bound held for g16 on every window measured).
TEST(KvFormats, SmolLM2Int8PerplexityWithinPointZeroFiveOfF32Kv) {
  const std::string path = testing::smollm2_path();
  INFERLAB_REQUIRE_FILE(path);
  LoadedModel m = load_gguf(path);
  std::ifstream in(testing::source_dir() + "/experiments/data/eval.txt");
  std::stringstream text;
  text << in.rdbuf();
  const auto tokens = quality_tokens(text.str(), m.tokenizer.get(), m.weights.config.vocab_size, 128);
  testing::FloatQuantization quant;
  CpuDevice device(2);
  Model model(m.weights, quant, device);
  Registry reg({testing::plugin_dir()});
  auto att = reg.create_attention("flash", reg.resolve(PluginKind::kAttention, "flash", {}, "test"), device);
  const double f32 = evaluate_perplexity(model, *att, tokens, 0, 0, nullptr).perplexity;
  const double int8 = evaluate_perplexity(model, *att, tokens, 0, 0, nullptr, format("int8", 16)).perplexity;
  const double per_head = evaluate_perplexity(model, *att, tokens, 0, 0, nullptr, format("int8", 0)).perplexity;
  std::printf("SmolLM2 perplexity on %zu tokens: f32 KV %.4f, int8 g16 %.4f, per token-head %.4f\n", tokens.size(), f32,
              int8, per_head);
  EXPECT_LE(int8, f32 + 0.05);
  EXPECT_NE(int8, f32);
}

}  // namespace
}  // namespace inferlab
