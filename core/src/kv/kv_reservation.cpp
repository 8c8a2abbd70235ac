#include "inferlab/kv/kv_reservation.h"

#include <algorithm>
#include <bit>

namespace inferlab {

namespace {
struct Named {
  KvReservation r;
  const char* name;
};
constexpr Named kNames[] = {{KvReservation::kOnDemand, "on_demand"},
                            {KvReservation::kFull, "full"},
                            {KvReservation::kOracle, "oracle"},
                            {KvReservation::kPow2, "pow2"},
                            {KvReservation::kMax, "max"}};
}  // namespace

const char* kv_reservation_name(KvReservation r) {
  for (const Named& n : kNames)
    if (n.r == r) return n.name;
  return "?";
}

bool parse_kv_reservation(const std::string& name, KvReservation& out) {
  for (const Named& n : kNames)
    if (name == n.name) {
      out = n.r;
      return true;
    }
  return false;
}

int reservation_tokens(KvReservation r, int prompt, int max_output, int max_draft, int max_seq_len) {
  const int exact = prompt + max_output;
  switch (r) {
    case KvReservation::kOnDemand:
      return 0;
    case KvReservation::kFull:
    case KvReservation::kOracle:
      return exact + max_draft;
    case KvReservation::kPow2: {
      // vLLM §6.1: "if the true output length is 25, it reserves 32 positions for outputs".
      const int out = static_cast<int>(std::bit_ceil(static_cast<unsigned>(std::max(max_output, 1))));
      const int cap = max_seq_len > 0 ? std::max(max_seq_len, exact) : prompt + out;
      return std::min(prompt + out, cap) + max_draft;
    }
    case KvReservation::kMax:
      return std::max(max_seq_len, exact) + max_draft;
  }
  return exact + max_draft;
}

}  // namespace inferlab
