// A check shared by the tests of the Linear families that run a group of linears reading one
// input as one dispatch (Linear::try_forward_group: quantization/gguf, int4, int8).
#pragma once
#include <cstdint>
#include <span>

#include "inferlab/device/device.h"
#include "inferlab/plugin/quantization.h"

namespace inferlab::testing {

// Pool dispatches of the same work done one call per linear and as one group.
struct GroupDispatches {
  std::uint64_t separate = 0, grouped = 0;
};

// Runs `linears` (every one with the first's in_features) on a random x [n, in] one forward each
// and as one forward_group, and expects the group's outputs equal to the separate ones bit for
// bit. When every linear reads_act_blocks(), also x's int8 blocks through forward_act_blocks
// against forward_group_act_blocks (the dispatches returned are forward's / forward_group's).
GroupDispatches expect_group_matches_separate(std::span<const Linear* const> linears, int n, CpuDevice& device,
                                              std::uint64_t seed);

// expect_group_matches_separate at 1 and 7 token rows, and the group in exactly one dispatch;
// when `fewer` also fewer dispatches than one call each.
void expect_group_in_one_dispatch(std::span<const Linear* const> linears, CpuDevice& device, std::uint64_t seed,
                                  bool fewer = true);

}  // namespace inferlab::testing
