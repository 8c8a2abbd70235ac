// See linear_group_checks.h.
#include "linear_group_checks.h"

#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "inferlab/support/rng.h"
#include "kernels/ref/matmul_int8.h"

namespace inferlab::testing {
namespace {

void expect_same_bits(const std::vector<float>& a, const std::vector<float>& b, std::size_t member) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i)
    ASSERT_EQ(std::memcmp(&a[i], &b[i], sizeof(float)), 0)
        << "member " << member << ", element " << i << ": " << a[i] << " grouped vs " << b[i] << " alone";
}

}  // namespace

GroupDispatches expect_group_matches_separate(std::span<const Linear* const> linears, int n, CpuDevice& device,
                                              std::uint64_t seed) {
  const int in = linears.front()->in_features();
  Rng rng(seed);
  std::vector<float> x(static_cast<std::size_t>(n) * in);  // [n, in]
  for (float& v : x) v = static_cast<float>(rng.normal());
  const float nan = std::numeric_limits<float>::quiet_NaN();
  bool blocks = true;
  std::vector<std::vector<float>> alone, grouped;  // [n, out] each
  std::vector<GroupMember> group;
  for (const Linear* l : linears) {
    alone.emplace_back(static_cast<std::size_t>(n) * l->out_features(), nan);
    grouped.emplace_back(static_cast<std::size_t>(n) * l->out_features(), nan);
    blocks = blocks && l->reads_act_blocks();
  }
  for (std::size_t i = 0; i < linears.size(); ++i) group.push_back({linears[i], grouped[i].data()});
  GroupDispatches d;
  std::uint64_t d0 = device.pool().dispatches();
  for (std::size_t i = 0; i < linears.size(); ++i) linears[i]->forward(x.data(), alone[i].data(), n, device);
  d.separate = device.pool().dispatches() - d0;
  d0 = device.pool().dispatches();
  forward_group(group, x.data(), n, device);
  d.grouped = device.pool().dispatches() - d0;
  for (std::size_t i = 0; i < linears.size(); ++i) expect_same_bits(grouped[i], alone[i], i);
  if (!blocks) return d;
  std::vector<std::int8_t> xq(x.size());                                // [n, in]
  std::vector<float> xs(static_cast<std::size_t>(n) * ref::act_blocks(in));  // [n, act_blocks(in)]
  ref::quantize_act_rows(x.data(), n, in, xq.data(), xs.data());
  for (std::size_t i = 0; i < linears.size(); ++i) {
    std::fill(grouped[i].begin(), grouped[i].end(), nan);
    linears[i]->forward_act_blocks(xq.data(), xs.data(), alone[i].data(), n, device);
  }
  forward_group_act_blocks(group, xq.data(), xs.data(), n, device);
  for (std::size_t i = 0; i < linears.size(); ++i) expect_same_bits(grouped[i], alone[i], i);
  return d;
}

void expect_group_in_one_dispatch(std::span<const Linear* const> linears, CpuDevice& device, std::uint64_t seed,
                                  bool fewer) {
  for (int n : {1, 7}) {
    SCOPED_TRACE(std::to_string(n) + " rows");
    const GroupDispatches d = expect_group_matches_separate(linears, n, device, seed + static_cast<std::uint64_t>(n));
    EXPECT_EQ(d.grouped, 1u);
    if (fewer) EXPECT_GT(d.separate, d.grouped);
  }
}

}  // namespace inferlab::testing
