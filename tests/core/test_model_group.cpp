// Model::forward hands the linears that read one input (wq/wk/wv, then w1/w3) to forward_group,
// on the normed x or, fused, on its int8 activation blocks: a recording Linear family that runs
// the groups itself sees exactly those groups, and the logits stay those of one call each.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "inferlab/error.h"
#include "inferlab/model/model.h"
#include "inferlab/support/rng.h"
#include "inferlab/model/weights.h"
#include "linear_group_checks.h"
#include "model_fixtures.h"
#include "plugins/common/quantization/float_linear.h"
#include "plugins/common/quantization/int4_linear.h"

namespace inferlab {
namespace {

using testing::FloatQuantization;
using testing::RefAttention;
using testing::SequenceRunner;

// The groups a run handed to the hook: each a list of the members' names, and whether it came
// as activation blocks.
struct GroupLog {
  std::vector<std::vector<std::string>> groups;
  std::vector<bool> blocks;
};

// A linear of the wrapped strategy that, as a family, runs its groups itself (one call each)
// and logs them. grouping = false: it declines (the default hook), so the model's calls fall
// back to one forward each.
class RecordingLinear final : public Linear {
 public:
  RecordingLinear(std::string name, std::unique_ptr<Linear> inner, GroupLog* log, bool grouping)
      : Linear(inner->out_features(), inner->in_features()), name_(std::move(name)), inner_(std::move(inner)),
        log_(log), grouping_(grouping) {}
  void forward(const float* x, float* y, int n, Device& d) const override { inner_->forward(x, y, n, d); }
  std::uint64_t weight_bytes() const override { return inner_->weight_bytes(); }
  void dequantize_row(int row, float* out) const override { inner_->dequantize_row(row, out); }
  bool reads_act_blocks() const override { return inner_->reads_act_blocks(); }
  void forward_act_blocks(const std::int8_t* xq, const float* xs, float* y, int n, Device& d) const override {
    inner_->forward_act_blocks(xq, xs, y, n, d);
  }
  bool try_forward_group(std::span<const GroupMember> group, const float* x, int n, Device& d) const override {
    if (!record(group, false)) return false;
    for (const GroupMember& m : group) m.linear->forward(x, m.y, n, d);
    return true;
  }
  bool try_forward_group_act_blocks(std::span<const GroupMember> group, const std::int8_t* xq, const float* xs, int n,
                                    Device& d) const override {
    if (!record(group, true)) return false;
    for (const GroupMember& m : group) m.linear->forward_act_blocks(xq, xs, m.y, n, d);
    return true;
  }

 private:
  bool record(std::span<const GroupMember> group, bool blocks) const {
    if (!grouping_) return false;
    std::vector<std::string> names;
    for (const GroupMember& m : group) names.push_back(dynamic_cast<const RecordingLinear&>(*m.linear).name_);
    log_->groups.push_back(names);
    log_->blocks.push_back(blocks);
    return true;
  }
  std::string name_;
  std::unique_ptr<Linear> inner_;
  GroupLog* log_;
  bool grouping_;
};

// fp32, or int4 groups of 32 with int8 activations (the fused path hands those blocks).
class RecordingQuantization final : public Quantization {
 public:
  RecordingQuantization(bool int4, GroupLog* log, bool grouping) : int4_(int4), log_(log), grouping_(grouping) {}
  using Quantization::make_linear;
  std::unique_ptr<Linear> make_linear(const std::string& name, std::vector<float> weight, int out, int in) override {
    std::unique_ptr<Linear> inner;
    if (int4_) {
      auto l = std::make_unique<Int4Linear>(weight, out, in, 32, false);
      l->set_activations(Int4Activations::kInt8);
      inner = std::move(l);
    } else {
      inner = f32_.make_linear(name, std::move(weight), out, in);
    }
    return std::make_unique<RecordingLinear>(name, std::move(inner), log_, grouping_);
  }

 private:
  FloatQuantization f32_;
  bool int4_;
  GroupLog* log_;
  bool grouping_;
};

std::vector<float> random_weights_vector(std::size_t count, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<float> w(count);
  for (float& x : w) x = static_cast<float>(0.05 * rng.normal());
  return w;
}

// Logits of a 9-token prefill and 2 decode steps.
std::vector<float> run(Model& model) {
  RefAttention attention;
  SequenceRunner runner(model, attention);
  std::vector<float> all = runner.feed_all_logits({1, 5, 9, 33, 7, 80, 2, 11, 4});
  for (int t : {3, 17}) {
    const std::vector<float>& l = runner.feed({t});
    all.insert(all.end(), l.begin(), l.end());
  }
  return all;
}

TEST(ModelGroup, QkvAndGateUpRunAsGroupsWithTheSameLogits) {
  const ModelConfig c = preset_config("stories260k");
  const ModelWeights w = random_weights(c, 8);
  for (bool int4 : {false, true})
    for (bool fuse : {false, true}) {
      SCOPED_TRACE(std::string(int4 ? "int4 + int8 activations" : "fp32") + (fuse ? ", fused" : ""));
      CpuDevice device(2);
      device.set_fuse(fuse);
      GroupLog log, none;
      RecordingQuantization grouped(int4, &log, true), alone(int4, &none, false);
      Model a(w, grouped, device), b(w, alone, device);
      const std::vector<float> la = run(a), lb = run(b);
      ASSERT_EQ(la.size(), lb.size());
      EXPECT_EQ(std::memcmp(la.data(), lb.data(), la.size() * sizeof(float)), 0);
      EXPECT_TRUE(none.groups.empty());
      // 3 steps x layers x {q/k/v, gate/up}, in the order the layers run.
      ASSERT_EQ(log.groups.size(), static_cast<std::size_t>(3 * c.n_layers * 2));
      for (std::size_t g = 0; g < log.groups.size(); ++g) {
        const std::string p = "layers." + std::to_string(g / 2 % static_cast<std::size_t>(c.n_layers)) + ".";
        const std::vector<std::string> want = g % 2 == 0 ? std::vector<std::string>{p + "wq", p + "wk", p + "wv"}
                                                         : std::vector<std::string>{p + "w1", p + "w3"};
        EXPECT_EQ(log.groups[g], want) << "group " << g;
        EXPECT_EQ(log.blocks[g], fuse && int4) << "group " << g;  // fused W4A8 hands the RMSNorm's blocks
      }
    }
}

// FloatLinear's hook: SmolLM2's q/k/v and w1/w3 shapes as one gemm_panels_f32_group each, the
// bits of one call each (q/k/v alone: q split over both threads, k and v on the caller; grouped:
// all three split), w1/w3 one dispatch instead of two; with a linear of another kind the group
// falls back.
TEST(ModelGroup, FloatLinearsRunAsOneDispatch) {
  CpuDevice device(2);
  const int d = 576, kv = 192, h = 1536;
  auto make = [](int out, int in, std::uint64_t seed) {
    return std::make_unique<FloatLinear>(random_weights_vector(static_cast<std::size_t>(out) * in, seed), out, in);
  };
  const auto q = make(d, d, 1), k = make(kv, d, 2), v = make(kv, d, 3), w1 = make(h, d, 4), w3 = make(h, d, 5);
  const Linear* const qkv[] = {q.get(), k.get(), v.get()};
  const Linear* const gate_up[] = {w1.get(), w3.get()};
  testing::expect_group_in_one_dispatch(qkv, device, 1, false);  // alone: k and v are under a grain, inline
  testing::expect_group_in_one_dispatch(gate_up, device, 2);
  Int4Linear other(random_weights_vector(static_cast<std::size_t>(kv) * d, 6), kv, d, 32, false);
  const Linear* const mixed[] = {q.get(), &other};
  testing::expect_group_matches_separate(mixed, 3, device, 3);
}

TEST(ModelGroup, RefusesEmptyGroupsAndMembersOfDifferentInputs) {
  CpuDevice device(1);
  FloatLinear a(random_weights_vector(8 * 32, 1), 8, 32), b(random_weights_vector(8 * 64, 2), 8, 64);
  std::vector<float> x(64), y(16);
  EXPECT_THROW(forward_group({}, x.data(), 1, device), Error);
  const GroupMember mixed[] = {{&a, y.data()}, {&b, y.data() + 8}};
  EXPECT_THROW(forward_group(mixed, x.data(), 1, device), Error);
  const GroupMember missing[] = {{&a, y.data()}, {nullptr, y.data() + 8}};
  EXPECT_THROW(forward_group(missing, x.data(), 1, device), Error);
  // fp32 linears take no activation blocks, grouped or not.
  std::vector<std::int8_t> xq(32);
  const GroupMember one[] = {{&a, y.data()}};
  EXPECT_THROW(forward_group_act_blocks(one, xq.data(), x.data(), 1, device), Error);
}

}  // namespace
}  // namespace inferlab
