// Linear's optional interface (see inferlab/quantization.h).
#include "inferlab/quantization.h"

#include <string>

#include "inferlab/error.h"

namespace inferlab {

void Linear::forward_act_blocks(const std::int8_t*, const float*, float*, int, Device&) const {
  throw Error("a [" + std::to_string(out_) + ", " + std::to_string(in_) +
              "] linear without int8 activations was handed activation blocks (reads_act_blocks() is false)");
}

bool Linear::try_forward_group(std::span<const GroupMember>, const float*, int, Device&) const { return false; }

bool Linear::try_forward_group_act_blocks(std::span<const GroupMember>, const std::int8_t*, const float*, int,
                                          Device&) const {
  return false;
}

namespace {

void check_group(std::span<const GroupMember> group, const char* who) {
  check(!group.empty(), std::string(who) + ": an empty group of linears");
  for (const GroupMember& m : group) {
    check(m.linear != nullptr && m.y != nullptr, std::string(who) + ": a group member without a linear or an output");
    check(m.linear->in_features() == group.front().linear->in_features(),
          std::string(who) + ": the members read one input, but their in_features differ (" +
              std::to_string(group.front().linear->in_features()) + " and " + std::to_string(m.linear->in_features()) +
              ")");
  }
}

}  // namespace

void forward_group(std::span<const GroupMember> group, const float* x, int n, Device& device) {
  check_group(group, "forward_group");
  if (group.front().linear->try_forward_group(group, x, n, device)) return;
  for (const GroupMember& m : group) m.linear->forward(x, m.y, n, device);
}

void forward_group_act_blocks(std::span<const GroupMember> group, const std::int8_t* xq, const float* xs, int n,
                              Device& device) {
  check_group(group, "forward_group_act_blocks");
  if (group.front().linear->try_forward_group_act_blocks(group, xq, xs, n, device)) return;
  for (const GroupMember& m : group) m.linear->forward_act_blocks(xq, xs, m.y, n, device);
}

void check_linear_row(const Linear& linear, int row, const char* who) {
  check(row >= 0 && row < linear.out_features(), std::string(who) + ": row " + std::to_string(row) +
                                                     " outside [0, " + std::to_string(linear.out_features()) + ")");
}

}  // namespace inferlab
