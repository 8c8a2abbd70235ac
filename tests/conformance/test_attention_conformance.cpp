// Attention conformance: every registered attention plugin, on every device kind it declares,
// with its default parameters and each parameter at the ends of its range, against
// kernels/ref ref_paged_attention (double accumulation) on awkward paged problems. Every K/V
// slot no sequence may read holds NaN (attention_fixtures), so a kernel that reads outside a
// context fails the NaN check. Every array is uploaded through the Device API, so the suite
// runs unchanged on a device whose memory is not the host's.
#include <algorithm>
#include <cstring>
#include <iostream>
#include <limits>
#include <span>
#include <vector>

#include <gtest/gtest.h>

#include "attention_checks.h"
#include "attention_fixtures.h"
#include "inferlab/error.h"
#include "plugin_cases.h"

namespace inferlab::testing {
namespace {

constexpr double kTolerance = 1e-5;        // max |got - ref| / max |ref|, softmax of O(1) scores
constexpr double kPeakedTolerance = 1e-4;  // scores of O(100): float exp loses digits
constexpr int kBlockSizes[] = {1, 7, 16};  // one token per block, an odd size, the usual size

// MHA, GQA groups of 4 and 2, MQA.
constexpr Heads kHeads[] = {{4, 4}, {8, 2}, {6, 3}, {8, 1}};

// A batch's arrays as owned host vectors, so tests can corrupt them.
struct HostBatch {
  std::vector<int> query_start, context_len, block_table;
  int max_blocks = 0, n_heads = 0, n_kv_heads = 0, head_dim = 0;
  float scale = 1.0f;

  explicit HostBatch(const AttentionBatch& b)
      : query_start(b.query_start.begin(), b.query_start.end()),
        context_len(b.context_len.begin(), b.context_len.end()),
        block_table(b.block_table.begin(), b.block_table.end()),
        max_blocks(b.max_blocks), n_heads(b.n_heads), n_kv_heads(b.n_kv_heads), head_dim(b.head_dim), scale(b.scale) {}
};

// Device memory holding a copy of host data.
template <class T>
Buffer upload(Device& device, std::span<const T> host) {
  Buffer buffer(device, std::max<std::size_t>(host.size_bytes(), 1));
  if (!host.empty()) device.copy_to_device(buffer.data(), host.data(), host.size_bytes());
  return buffer;
}

// Runs `attention` on `device` with the batch arrays, K/V, q and the initial contents of `out`
// uploaded, and copies `out` back. kv_floats: floats of each of K and V in the pool.
void run_uploaded(Attention& attention, const HostBatch& hb, const KvLayerView& host_kv, std::size_t kv_floats,
                  std::span<const float> q, std::vector<float>& out, Device& device) {
  Buffer qs = upload<int>(device, hb.query_start), cl = upload<int>(device, hb.context_len),
         bt = upload<int>(device, hb.block_table);
  Buffer k = upload<float>(device, {static_cast<const float*>(host_kv.k), kv_floats});
  Buffer v = upload<float>(device, {static_cast<const float*>(host_kv.v), kv_floats});
  Buffer qd = upload<float>(device, q), od = upload<float>(device, out);
  AttentionBatch batch;
  batch.query_start = {qs.as<const int>(), hb.query_start.size()};
  batch.context_len = {cl.as<const int>(), hb.context_len.size()};
  batch.block_table = {bt.as<const int>(), hb.block_table.size()};
  batch.max_blocks = hb.max_blocks;
  batch.n_heads = hb.n_heads;
  batch.n_kv_heads = hb.n_kv_heads;
  batch.head_dim = hb.head_dim;
  batch.scale = hb.scale;
  KvLayerView kv = host_kv;
  kv.k = k.data();
  kv.v = v.data();
  attention.forward(batch, kv, qd.as<const float>(), od.as<float>(), device);
  device.synchronize();
  if (!out.empty()) device.copy_to_host(out.data(), od.data(), out.size() * sizeof(float));
}

std::size_t kv_floats(const KvLayerView& kv) {
  return static_cast<std::size_t>(kv.num_blocks) * kv.block_size * kv.n_kv_heads * kv.head_dim;
}

class AttentionConformance : public ::testing::TestWithParam<PluginCase> {
 protected:
  void SetUp() override {
    std::string why;
    device_ = open_device(GetParam().device, why);
    if (!device_) GTEST_SKIP() << why;
    attention_ = conformance_registry().create_attention(GetParam().plugin, resolve_case(GetParam()), *device_);
  }

  // False (with a visible skip message recorded) when the plugin refuses these head counts.
  bool supported(const AttentionProblemSpec& spec) {
    ModelConfig model;
    model.name = "conformance";
    model.n_heads = spec.n_heads;
    model.n_kv_heads = spec.n_kv_heads;
    model.dim = spec.n_heads * spec.head_dim;
    model.hidden_dim = 2 * model.dim;
    model.n_layers = 1;
    model.vocab_size = 64;
    model.max_seq_len = 4096;
    const auto reasons = refusals(GetParam(), model);
    for (const auto& r : reasons)
      std::cout << "[  SKIPPED ] heads " << spec.n_heads << "/" << spec.n_kv_heads << ": " << r << "\n";
    return reasons.empty();
  }

  std::vector<float> run(const AttentionProblem& problem) {
    std::vector<float> out(problem.out_size(), std::numeric_limits<float>::quiet_NaN());
    run_uploaded(*attention_, HostBatch(problem.batch()), problem.kv(), kv_floats(problem.kv()),
                 {problem.q(), problem.out_size()}, out, *device_);
    return out;
  }

  // Finite output within `tolerance` of the reference (nothing when the plugin refuses the heads).
  void expect_parity(const AttentionProblemSpec& spec, double tolerance) {
    if (!supported(spec)) return;
    AttentionProblem problem(spec);
    const std::vector<float> got = run(problem);
    EXPECT_EQ(count_non_finite(got), 0u) << "NaN/inf in the output: a poisoned slot was read or a row was not written";
    EXPECT_LT(max_relative_error(got, reference_output(problem)), tolerance);
  }

  static AttentionProblemSpec spec(std::vector<SeqShape> seqs, int block_size, Heads heads, std::uint64_t seed) {
    return problem_spec(std::move(seqs), block_size, heads, seed);
  }

  std::unique_ptr<Device> device_;
  std::shared_ptr<Attention> attention_;
};

// Prefill chunks mid-sequence, decode rows, a speculative-verify chunk and a whole prefill in
// one batch, for MHA, GQA and MQA, at block sizes 1, 7 and 16.
TEST_P(AttentionConformance, MixedStepMatchesReferenceForEveryHeadLayoutAndBlockSize) {
  std::uint64_t seed = 100;
  for (int bs : kBlockSizes)
    for (Heads h : kHeads) {
      SCOPED_TRACE("block_size " + std::to_string(bs) + ", heads " + std::to_string(h.n_heads) + "/" +
                   std::to_string(h.n_kv_heads));
      expect_parity(spec(mixed_step_shapes(), bs, h, ++seed), kTolerance);
    }
}

// Contexts ending just before, on and just after block edges, with one or several query rows
// (a query chunk that itself crosses an edge).
TEST_P(AttentionConformance, ContextsAroundBlockEdgesMatchReference) {
  std::uint64_t seed = 200;
  for (int bs : kBlockSizes) {
    SCOPED_TRACE("block_size " + std::to_string(bs));
    std::vector<SeqShape> seqs = {{bs, 1}, {bs + 1, 1}, {bs + 1, 2}, {2 * bs, bs}, {2 * bs + 1, 2 * bs + 1},
                                  {3 * bs - 1, std::min(3, 3 * bs - 1)}, {4 * bs + 1, bs + 2}};
    if (bs > 1) seqs.push_back({bs - 1, bs - 1});
    expect_parity(spec(seqs, bs, {8, 2}, ++seed), kTolerance);
  }
}

// Blocks in order (no shuffling) and a single sequence alone: the easy layouts some kernels
// special-case.
TEST_P(AttentionConformance, UnshuffledAndSingleSequenceBatchesMatchReference) {
  AttentionProblemSpec s = spec(mixed_step_shapes(), 16, {8, 2}, 301);
  s.shuffle_blocks = false;
  s.spare_blocks = 0;
  expect_parity(s, kTolerance);
  expect_parity(spec({{1, 1}}, 16, {8, 2}, 302), kTolerance);
  expect_parity(spec({{1000, 1}}, 16, {8, 2}, 303), kTolerance);
  expect_parity(spec({{65, 65}}, 7, {4, 4}, 304), kTolerance);
}

// Large scores (a peaked softmax) must neither overflow nor lose the NaN guard.
TEST_P(AttentionConformance, PeakedSoftmaxStaysFiniteAndClose) {
  AttentionProblemSpec s = spec(mixed_step_shapes(), 16, {8, 2}, 401);
  s.q_scale = 20.0f;
  expect_parity(s, kPeakedTolerance);
}

// A step with no query rows (no sequences, or sequences with nothing queried) must not write
// a single byte of the output buffer.
TEST_P(AttentionConformance, ZeroRowBatchLeavesTheOutputUntouched) {
  const std::vector<float> poisoned(64, std::numeric_limits<float>::quiet_NaN());
  {
    SCOPED_TRACE("no sequences");
    AttentionProblem empty(spec({}, 16, {8, 2}, 501));
    std::vector<float> out = poisoned;
    ASSERT_NO_THROW(run_uploaded(*attention_, HostBatch(empty.batch()), empty.kv(), kv_floats(empty.kv()), {},
                                 out, *device_));
    EXPECT_EQ(std::memcmp(out.data(), poisoned.data(), out.size() * sizeof(float)), 0);
  }
  {
    SCOPED_TRACE("sequences with no query rows");
    AttentionProblem idle(spec({{40, 0}, {17, 0}, {1, 0}}, 7, {8, 2}, 502));
    ASSERT_EQ(idle.rows(), 0);
    std::vector<float> out = poisoned;
    ASSERT_NO_THROW(
        run_uploaded(*attention_, HostBatch(idle.batch()), idle.kv(), kv_floats(idle.kv()), {}, out, *device_));
    EXPECT_EQ(std::memcmp(out.data(), poisoned.data(), out.size() * sizeof(float)), 0);
  }
}

// A batch that disagrees with itself or with the KV view is refused with inferlab::Error before
// any memory is read (check_attention_batch), never read out of bounds.
TEST_P(AttentionConformance, InconsistentBatchIsAnError) {
  AttentionProblem problem(spec({{40, 7}, {77, 1}, {16, 1}}, 16, {8, 2}, 601));
  const HostBatch good(problem.batch());
  const KvLayerView kv = problem.kv();
  const std::size_t floats = kv_floats(kv);
  const std::span<const float> q{problem.q(), problem.out_size()};
  auto expect_error = [&](const char* what, const HostBatch& hb, const KvLayerView& view) {
    SCOPED_TRACE(what);
    std::vector<float> out(problem.out_size(), 0.0f);
    EXPECT_THROW(run_uploaded(*attention_, hb, view, floats, q, out, *device_), Error);
  };
  {
    HostBatch hb = good;
    hb.block_table[0] = kv.num_blocks;  // a block past the pool
    expect_error("block outside the pool", hb, kv);
  }
  {
    HostBatch hb = good;
    hb.block_table[static_cast<std::size_t>(hb.max_blocks)] = -1;  // seq 1's first block missing
    expect_error("negative block inside a context", hb, kv);
  }
  {
    HostBatch hb = good;
    hb.context_len[0] = hb.max_blocks * kv.block_size + 1;  // the table is too short
    expect_error("block table too short for the context", hb, kv);
  }
  {
    HostBatch hb = good;
    hb.context_len[0] = 6;  // 7 query rows
    expect_error("more query rows than context", hb, kv);
  }
  {
    HostBatch hb = good;
    hb.n_kv_heads = 4;  // the KV view has 2
    expect_error("n_kv_heads disagrees with the KV view", hb, kv);
  }
  {
    HostBatch hb = good;
    hb.head_dim = 8;
    expect_error("head_dim disagrees with the KV view", hb, kv);
  }
  {
    HostBatch hb = good;
    hb.n_heads = 7;  // not a multiple of n_kv_heads
    expect_error("n_heads not a multiple of n_kv_heads", hb, kv);
  }
  {
    HostBatch hb = good;
    hb.context_len.pop_back();  // query_start now has n_seqs + 2 entries
    expect_error("query_start and context_len sizes disagree", hb, kv);
  }
  {
    HostBatch hb = good;
    hb.max_blocks += 1;  // block_table no longer n_seqs * max_blocks
    expect_error("block_table size disagrees with max_blocks", hb, kv);
  }
}

INSTANTIATE_TEST_SUITE_P(Plugins, AttentionConformance, ::testing::ValuesIn(plugin_cases(PluginKind::kAttention)),
                         case_name);
// `inferlab conformance LIB.so` instantiates only the suites of its plugins' kinds.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(AttentionConformance);

}  // namespace
}  // namespace inferlab::testing
