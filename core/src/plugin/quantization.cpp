// Linear's optional interface (see inferlab/plugin/quantization.h).
#include "inferlab/plugin/quantization.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "inferlab/error.h"

namespace inferlab {

std::uint64_t Quantization::planned_bytes(const std::string& name, int out, int in, const ModelConfig&) {
  // Storage and scales grow with the rows and groups run along `in`, so a probe of the first
  // rows, scaled, sizes the whole linear.
  constexpr int kProbeRows = 64;
  const int rows = std::min(out, kProbeRows);
  std::vector<float> w(static_cast<std::size_t>(rows) * static_cast<std::size_t>(in));  // [rows, in]
  std::uint32_t state = 0x9E3779B9u;
  for (float& x : w) {  // xorshift values in [-1, 1): a strategy may treat zeros specially
    state ^= state << 13, state ^= state >> 17, state ^= state << 5;
    x = static_cast<float>(state >> 8) / static_cast<float>(1u << 23) - 1.0f;
  }
  const std::unique_ptr<Linear> probe = make_linear(name, std::move(w), rows, in);
  return static_cast<std::uint64_t>(std::ceil(static_cast<double>(probe->weight_bytes()) * out / rows));
}

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
  // Twice a layer and step: the messages are built only on a failure.
  check(!group.empty(), [&] { return std::string(who) + ": an empty group of linears"; });
  for (const GroupMember& m : group) {
    check(m.linear != nullptr && m.y != nullptr,
          [&] { return std::string(who) + ": a group member without a linear or an output"; });
    check(m.linear->in_features() == group.front().linear->in_features(), [&] {
      return std::string(who) + ": the members read one input, but their in_features differ (" +
             std::to_string(group.front().linear->in_features()) + " and " + std::to_string(m.linear->in_features()) +
             ")";
    });
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
  check(row >= 0 && row < linear.out_features(), [&] {
    return std::string(who) + ": row " + std::to_string(row) + " outside [0, " + std::to_string(linear.out_features()) + ")";
  });
}

}  // namespace inferlab
