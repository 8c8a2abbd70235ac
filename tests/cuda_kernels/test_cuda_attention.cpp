// The CUDA attention kernels (kernels/cuda/attention_*.cu) through the three attention plugins on
// a CudaDevice, against kernels/ref ref_paged_attention (double accumulation): f32, int8, f16 and
// bf16 KV (codes and per (slot, kv head) scales made here; the reference reads the same values
// dequantised), rows 1 / 3 / 17, contexts 1 / 129 / 1000, block sizes 1 / 7 / 16, MHA / GQA /
// MQA, head_dim 16 and 40 (not a multiple of a warp), the plugins' parameters at awkward values.
// Unread slots are NaN (attention_fixtures; int8: NaN scales) and the output starts NaN.
// Skipped with the reason when no CUDA device is visible.
#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "attention_checks.h"
#include "attention_fixtures.h"
#include "cuda_test_support.h"
#include "inferlab/device/cuda_device.h"
#include "inferlab/plugin/registry.h"
#include "plugins/common/attention/attention_plan_cuda.h"
#include "kernels/ref/attention.h"
#include "test_support.h"

namespace inferlab::testing {
namespace {

struct Variant {
  std::string plugin;
  std::map<std::string, ParamValue> params;
};

// Defaults (flash splits few-row sequences over their context: FlashDecoding), and parameter
// values that stress the tiling: one-position tiles, row tiles that do not divide 17, flash
// unsplit, forced splits beyond the context of short sequences, 17-row sequences split.
const std::vector<Variant> kVariants = {
    {"naive", {}},
    {"flash", {}},
    {"flash", {{"tile", std::int64_t{1}}, {"query_rows", std::int64_t{1}}}},
    {"flash", {{"tile", std::int64_t{7}}, {"query_rows", std::int64_t{5}}}},
    {"flash", {{"decode_split", false}}},  // one block per kv head: the path before FlashDecoding
    {"split_k", {}},
    {"split_k", {{"splits", std::int64_t{7}}}},
    {"split_k", {{"splits", std::int64_t{3}}, {"max_query_rows", std::int64_t{17}}}},
};

// A host int8 copy of a problem's f32 K or V: per (slot, kv head) scale = max|x| / 127 and codes
// round(x / scale) (the KvStorage format); a NaN cell (unread slot) keeps NaN as its scale.
struct Int8Kv {
  std::vector<signed char> codes;  // [slots, n_kv_heads, head_dim]
  std::vector<float> scale;        // [slots, n_kv_heads]
  std::vector<float> dequantized;  // [slots, n_kv_heads, head_dim] scale * code (NaN cells NaN)
};

Int8Kv quantize_kv(const float* x, std::size_t cells, int head_dim) {
  Int8Kv q;
  const std::size_t d = static_cast<std::size_t>(head_dim);
  q.codes.resize(cells * d);
  q.scale.resize(cells);
  q.dequantized.resize(cells * d);
  for (std::size_t c = 0; c < cells; ++c) {
    float amax = 0.0f;
    bool poisoned = false;
    for (std::size_t i = 0; i < d; ++i) {
      poisoned = poisoned || std::isnan(x[c * d + i]);
      amax = std::max(amax, std::fabs(x[c * d + i]));
    }
    const float s = poisoned ? std::numeric_limits<float>::quiet_NaN() : amax / 127.0f;
    q.scale[c] = s;
    for (std::size_t i = 0; i < d; ++i) {
      const float code = poisoned || s == 0.0f ? 0.0f : std::clamp(std::round(x[c * d + i] / s), -127.0f, 127.0f);
      q.codes[c * d + i] = static_cast<signed char>(code);
      q.dequantized[c * d + i] = s * code;
    }
  }
  return q;
}

// A host f16 / bf16 copy of a problem's f32 K or V through kv_quantize_row (the KvStorage
// format, rounded to nearest even; NaN cells stay NaN), and the values it stands for.
struct HalfKv {
  std::vector<std::uint16_t> codes;  // [slots, n_kv_heads, head_dim]
  std::vector<float> widened;        // [slots, n_kv_heads, head_dim]
};

HalfKv half_kv(KvDtype dtype, const float* x, std::size_t cells, int head_dim) {
  HalfKv h;
  const std::size_t n = cells * static_cast<std::size_t>(head_dim);
  h.codes.resize(n);
  h.widened.resize(n);
  for (std::size_t c = 0; c < cells; ++c) {
    const std::size_t at = c * static_cast<std::size_t>(head_dim);
    kv_quantize_row(dtype, head_dim, x + at, head_dim, h.codes.data() + at, nullptr);
    kv_dequantize_row(dtype, head_dim, h.codes.data() + at, nullptr, head_dim, h.widened.data() + at);
  }
  return h;
}

class CudaAttention : public ::testing::Test {
 public:  // expect_every_kernel_matches below runs error_of
  void SetUp() override {
    INFERLAB_REQUIRE_CUDA();
    device_ = make_device(DeviceKind::kCuda, 1);
  }

  // Runs the variant on the problem with K/V stored as `dtype` (f32, int8 per token-head, f16 or
  // bf16) and returns max relative error against the reference on the values that dtype stores,
  // failing on any non-finite output.
  // host_arrays: the batch also carries its arrays' host copies, as Model::forward passes them
  // (the plugins then plan without downloading).
  double error_of(const Variant& variant, const AttentionProblem& problem, KvDtype dtype, bool host_arrays = false) {
    const Params params = registry_.resolve(PluginKind::kAttention, variant.plugin, variant.params, "test");
    auto attention = registry_.create_attention(variant.plugin, params, *device_);
    const AttentionBatch hb = problem.batch();
    KvLayerView kv = problem.kv();
    const std::size_t cells = static_cast<std::size_t>(kv.num_blocks) * kv.block_size * kv.n_kv_heads;
    const std::size_t floats = cells * kv.head_dim;

    std::vector<float> ref_k(static_cast<const float*>(kv.k), static_cast<const float*>(kv.k) + floats);
    std::vector<float> ref_v(static_cast<const float*>(kv.v), static_cast<const float*>(kv.v) + floats);
    Buffer k, v, ks, vs;
    if (kv_dtype_half(dtype)) {
      HalfKv hk = half_kv(dtype, ref_k.data(), cells, kv.head_dim), hv = half_kv(dtype, ref_v.data(), cells, kv.head_dim);
      k = to_device(*device_, hk.codes);
      v = to_device(*device_, hv.codes);
      ref_k = std::move(hk.widened);
      ref_v = std::move(hv.widened);
      kv.k_dtype = kv.v_dtype = dtype;
    } else if (dtype == KvDtype::kInt8) {
      Int8Kv qk = quantize_kv(ref_k.data(), cells, kv.head_dim), qv = quantize_kv(ref_v.data(), cells, kv.head_dim);
      k = to_device(*device_, qk.codes);
      v = to_device(*device_, qv.codes);
      ks = to_device(*device_, qk.scale);
      vs = to_device(*device_, qv.scale);
      ref_k = std::move(qk.dequantized);
      ref_v = std::move(qv.dequantized);
      kv.k_dtype = kv.v_dtype = KvDtype::kInt8;
      kv.group_size = kv.head_dim;  // one scale per token-head
      kv.k_params = ks.as<const float>();
      kv.v_params = vs.as<const float>();
    } else {
      k = to_device(*device_, ref_k);
      v = to_device(*device_, ref_v);
    }
    kv.k = k.data();
    kv.v = v.data();

    const std::vector<int> qs(hb.query_start.begin(), hb.query_start.end()),
        cl(hb.context_len.begin(), hb.context_len.end()), bt(hb.block_table.begin(), hb.block_table.end());
    Buffer d_qs = to_device(*device_, qs), d_cl = to_device(*device_, cl), d_bt = to_device(*device_, bt);
    AttentionBatch db = hb;
    db.query_start = {d_qs.as<const int>(), qs.size()};
    db.context_len = {d_cl.as<const int>(), cl.size()};
    db.block_table = {d_bt.as<const int>(), bt.size()};
    if (host_arrays) {
      db.host_query_start = qs;
      db.host_context_len = cl;
      db.host_block_table = bt;
    }
    Buffer q = to_device(*device_, std::vector<float>(problem.q(), problem.q() + problem.out_size()));
    Buffer out = to_device(*device_, nan_filled(problem.out_size()));
    attention->forward(db, kv, q.as<const float>(), out.as<float>(), *device_);
    const std::vector<float> got = to_host<float>(*device_, out, problem.out_size());

    KvLayerView ref_kv = problem.kv();
    ref_kv.k = ref_k.data();
    ref_kv.v = ref_v.data();
    std::vector<float> want(problem.out_size());
    ref::ref_paged_attention(hb, ref_kv, problem.q(), want.data());
    EXPECT_EQ(count_non_finite(got), 0u) << "NaN/inf: a poisoned slot was read or a row was not written";
    return max_relative_error(got, want);
  }

  Registry registry_{{plugin_dir()}};
  std::unique_ptr<Device> device_;
};

constexpr Heads kHeads[] = {{8, 2}, {4, 4}, {8, 1}};

// Every kernel and parameter set on one batch mixing decode rows and prefill chunks over paged
// contexts (rows 1 / 3 / 17 against contexts 1 / 129 / 1000), at each block size, head layout,
// head_dim and KV dtype given, within 1e-5 relative of the reference.
void expect_every_kernel_matches(CudaAttention& t, std::initializer_list<int> block_sizes,
                                 std::initializer_list<int> head_dims, std::initializer_list<KvDtype> dtypes,
                                 std::uint64_t seed) {
  const std::vector<SeqShape> seqs = {{1, 1}, {129, 3}, {1000, 1}, {1000, 17}, {17, 17}, {129, 1}, {40, 0}};
  for (const Variant& variant : kVariants)
    for (int bs : block_sizes)
      for (Heads h : kHeads)
        for (int head_dim : head_dims)
          for (KvDtype dtype : dtypes) {
            SCOPED_TRACE(variant.plugin + " #params " + std::to_string(variant.params.size()) + ", block_size " +
                         std::to_string(bs) + ", heads " + std::to_string(h.n_heads) + "/" +
                         std::to_string(h.n_kv_heads) + ", head_dim " + std::to_string(head_dim) + ", " +
                         kv_dtype_name(dtype) + " KV");
            AttentionProblemSpec spec = problem_spec(seqs, bs, h, ++seed);
            spec.head_dim = head_dim;
            AttentionProblem problem(spec);
            EXPECT_LT(t.error_of(variant, problem, dtype), 1e-5);
          }
}

TEST_F(CudaAttention, EveryKernelMatchesTheReferenceOnAwkwardPagedBatches) {
  // Rows 1 / 3 / 17 against contexts 1 / 129 / 1000, mixed in one batch, and a prefill chunk.
  expect_every_kernel_matches(*this, {1, 7, 16}, {16, 40}, {KvDtype::kF32, KvDtype::kInt8}, 7000);
}

// f16 / bf16 KV, read natively (2-byte loads widened to float in registers; flash two values per
// load when head_dim is even, one at head_dim 15): every kernel and parameter set, decode rows,
// prefill chunks and flash's decode split, against the reference on the values the format stores
// (what kv_quantize_row / kv_write_half write) within 1e-5 relative, as f32 and int8.
TEST_F(CudaAttention, HalfKvMatchesTheReferenceOnTheStoredValues) {
  expect_every_kernel_matches(*this, {1, 16}, {16, 40, 15}, {KvDtype::kF16, KvDtype::kBf16}, 9000);
}

// A long decode context split over many blocks of the grid and a peaked softmax (large scores):
// the log-sum-exp merge must stay finite and exact.
TEST_F(CudaAttention, LongContextDecodeAndPeakedScoresStayExact) {
  for (const Variant& variant : kVariants) {
    SCOPED_TRACE(variant.plugin);
    AttentionProblemSpec spec = problem_spec({{4096, 1}, {3000, 2}}, 16, {8, 2}, 7777);
    spec.q_scale = 20.0f;
    AttentionProblem problem(spec);
    EXPECT_LT(error_of(variant, problem, KvDtype::kF32), 1e-4);
    EXPECT_LT(error_of(variant, problem, KvDtype::kF32, /*host_arrays=*/true), 1e-4);
    for (KvDtype half : {KvDtype::kF16, KvDtype::kBf16}) EXPECT_LT(error_of(variant, problem, half), 1e-4);
  }
}

// A batch that carries its arrays' host copies is planned from them: mirror_batch returns the
// host arrays even where the device arrays (never read) hold something else.
#if INFERLAB_HAVE_CUDA  // cuda_device and mirror_batch exist only in a CUDA build
TEST_F(CudaAttention, MirrorTakesTheHostArraysWithoutDownloading) {
  const std::vector<int> qs = {0, 1, 3}, cl = {5, 9}, bt = {0, 1, -1, 2, 3, 4};
  Buffer other = to_device(*device_, std::vector<int>(6, 77));
  AttentionBatch b;
  b.query_start = {other.as<const int>(), qs.size()};
  b.context_len = {other.as<const int>(), cl.size()};
  b.block_table = {other.as<const int>(), bt.size()};
  b.max_blocks = 3;
  CudaDevice& cuda = cuda_device(*device_, "test");
  const cuda::HostBatchMirror downloaded = cuda::mirror_batch(b, cuda);
  EXPECT_EQ(downloaded.query_start, std::vector<int>(3, 77));  // no host arrays: the device's
  b.host_query_start = qs;
  b.host_context_len = cl;
  b.host_block_table = bt;
  const cuda::HostBatchMirror m = cuda::mirror_batch(b, cuda);
  EXPECT_EQ(m.query_start, qs);
  EXPECT_EQ(m.context_len, cl);
  EXPECT_EQ(m.block_table, bt);
  EXPECT_EQ(m.view.rows(), 3);
}
#endif

}  // namespace
}  // namespace inferlab::testing
