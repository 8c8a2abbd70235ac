// How much KV space a sequence reserves, and when ([kv] reservation). The paged default takes
// blocks as tokens arrive (vLLM); the others reserve a sequence's whole life at admission, so
// admission, batch size and preemption follow from the reservation. The three Orca baselines
// of Kwon et al. 2023 (vLLM) §6.1 also place that reservation as one contiguous run of blocks,
// as a system without block tables must, which is where external fragmentation comes from.
#pragma once
#include <string>

namespace inferlab {

enum class KvReservation {
  kOnDemand,  // "on_demand": paged, a block when the previous one is full
  kFull,      // "full": paged blocks for prompt + max_output at admission
  kOracle,    // "oracle": one contiguous run of prompt + max_output (the exact length) — Orca(Oracle)
  kPow2,      // "pow2": prompt + max_output rounded up to a power of two, at most max_seq_len — Orca(Pow2)
  kMax,       // "max": the model's max_seq_len for every request — Orca(Max)
};

inline constexpr const char* kKvReservationNames = "on_demand, full, oracle, pow2, max";

// The TOML name of a policy, and back (false for an unknown name).
const char* kv_reservation_name(KvReservation r);
bool parse_kv_reservation(const std::string& name, KvReservation& out);

// The policy reserves a sequence's life at admission (everything but on_demand).
inline bool reserves_ahead(KvReservation r) { return r != KvReservation::kOnDemand; }
// The policy places each reservation as one contiguous run of blocks (the Orca baselines).
inline bool reserves_contiguous(KvReservation r) {
  return r == KvReservation::kOracle || r == KvReservation::kPow2 || r == KvReservation::kMax;
}

// Tokens of KV space a sequence of `prompt` tokens and `max_output` output tokens reserves at
// admission under `r` (0 for on_demand), plus `max_draft` speculative positions. max_seq_len
// (the model's) is what kMax reserves and caps kPow2; no policy reserves less than the
// sequence's own prompt + max_output.
int reservation_tokens(KvReservation r, int prompt, int max_output, int max_draft, int max_seq_len);

}  // namespace inferlab
