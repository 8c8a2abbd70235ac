// quantization/gguf's group hook (GgufBlockLinear::try_forward_group): packed linears reading one
// input run as one cpu::gemm_gguf_group, with every member's own bits and fewer dispatches; a
// group it cannot run (a member on fp32 activations) falls back to one call each.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "gguf_block_fixtures.h"
#include "gguf_linear.h"
#include "inferlab/device/device.h"
#include "inferlab/error.h"
#include "linear_group_checks.h"

namespace inferlab::plugins {
namespace {

std::unique_ptr<GgufBlockLinear> linear(GgmlType type, int out, int in, bool int8_activations, std::uint64_t seed) {
  return std::make_unique<GgufBlockLinear>(type, testing::random_gguf_blocks(type, out, in, seed), out, in,
                                           int8_activations);
}

TEST(GgufGroup, PackedLinearsRunAsOneDispatchWithTheirOwnBits) {
  if (!cpu::gemm_gguf_available()) GTEST_SKIP() << "this build has neither AVX-512 VNNI nor AVX2: nothing is packed";
  const int in = 576;
  // wq / wk / wv of SmolLM2's shape, of three packed types, out of wk not a multiple of 32.
  const auto q = linear(GgmlType::kQ8_0, 576, in, true, 1), k = linear(GgmlType::kQ4_0, 190, in, true, 2),
             v = linear(GgmlType::kQ4_1, 192, in, true, 3);
  const Linear* const group[] = {q.get(), k.get(), v.get()};
  for (const Linear* l : group) EXPECT_TRUE(l->reads_act_blocks());
  CpuDevice device(2);
  testing::expect_group_in_one_dispatch(group, device, 10);
  // A Q4_K_M layer's mix: Q4_K and Q6_K beside Q8_0, on whole super-blocks.
  const auto kq = linear(GgmlType::kQ4_K, 512, 512, true, 11), kk = linear(GgmlType::kQ6_K, 250, 512, true, 12),
             kv = linear(GgmlType::kQ8_0, 256, 512, true, 13);
  const Linear* const kgroup[] = {kq.get(), kk.get(), kv.get()};
  for (const Linear* l : kgroup) EXPECT_TRUE(l->reads_act_blocks());
  testing::expect_group_in_one_dispatch(kgroup, device, 14);
}

TEST(GgufGroup, OtherGroupsFallBackToOneCallEach) {
  const int in = 512;  // whole Q4_K super-blocks
  CpuDevice device(2);
  // A member on fp32 activations is never packed: the group runs one call each, still the same bits.
  const auto packed = linear(GgmlType::kQ8_0, 64, in, true, 4), kquant = linear(GgmlType::kQ4_K, 40, in, false, 5);
  const Linear* const mixed[] = {packed.get(), kquant.get()};
  EXPECT_FALSE(kquant->reads_act_blocks());
  testing::expect_group_matches_separate(mixed, 3, device, 6);
  // fp32 activations run matmul_gguf on the file's blocks: nothing packed, no blocks read.
  const auto a = linear(GgmlType::kQ8_0, 64, in, false, 7), b = linear(GgmlType::kQ4_0, 33, in, false, 8);
  const Linear* const fp32[] = {a.get(), b.get()};
  EXPECT_FALSE(a->reads_act_blocks());
  testing::expect_group_matches_separate(fp32, 2, device, 9);
  // A member that takes no activation blocks is refused them, grouped or not.
  std::vector<std::int8_t> xq(in);
  std::vector<float> xs(in / 32), y(64 + 33);
  const GroupMember members[] = {{a.get(), y.data()}, {b.get(), y.data() + 64}};
  EXPECT_THROW(forward_group_act_blocks(members, xq.data(), xs.data(), 1, device), Error);
}

}  // namespace
}  // namespace inferlab::plugins
