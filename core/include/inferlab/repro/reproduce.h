// Published claims checked against this framework (`inferlab reproduce`): each
// experiments/repro/*.toml holds one or more [[claim]] tables (and, for claims measured by a
// run, an experiment in the same file). A claim names a quantity, its expected value, a
// tolerance and a class: exact (arithmetic or a simulated ranking; must hold on any machine,
// run in CI), cpu (measured on this CPU), gpu (needs a GPU; reported as skipped without one).
#pragma once
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "inferlab/plugin/registry.h"

namespace inferlab {

struct Claim {
  std::string file;      // the TOML it came from
  std::string source;    // paper, section, table
  std::string text;      // what the paper says
  std::string quantity;  // kv_bytes_per_token, kv_slots, spec_expected_tokens, spec_speedup, ratio
  std::string cls = "exact";
  std::string compare = "approx";  // approx: |measured - expected| <= tolerance * |expected|;
                                   // greater / less: measured > / < expected
  double expected = 0;
  double tolerance = 0;  // relative
  std::map<std::string, double> args;         // numeric arguments (alpha, gamma, c, kv_gib, kv_bytes)
  std::map<std::string, std::string> names;   // ratio: metric, numerator, denominator variants
};

struct ClaimResult {
  Claim claim;
  double measured = 0;
  std::string verdict;  // "pass", "FAIL", "skipped (...)"
  bool failed() const { return verdict == "FAIL"; }
};

// Every claim in a file (Error with the file and what is wrong for a malformed one, an unknown
// quantity included); none without a [claim] table, or an Error when `required`.
std::vector<Claim> read_claims(const std::string& path, bool required = true);
// What measuring a quantity needs: its own arguments only, the file's model (its shape, no run),
// or a run of the file's experiment; kUnknown for a name no claim may use. Ordered by how much
// of the file they need (`validate` takes the largest over a file's claims).
enum class ClaimUse { kUnknown, kArguments, kModel, kRun };
ClaimUse claim_quantity_use(const std::string& quantity);
// Computes or runs what the claim needs (a ratio claim runs the file's experiment, which must
// be a simulated one, into a scratch folder) and compares.
ClaimResult check_claim(const Claim& claim, const Registry& registry);

// Leviathan et al. 2023, Eq. 1: expected tokens per step with acceptance rate alpha and gamma
// drafts, and Theorem 3.8's walltime speedup with draft cost ratio c.
double spec_expected_tokens(double alpha, int gamma);
double spec_speedup(double alpha, int gamma, double c);

// Sarathi (Agrawal et al. 2023, §4, decode-maximal batching): the most decodes that can
// piggyback on a prefill chunk are the requests whose KV cache fits beside the model, B = ⌊(M_G − M_S) / (L · m_kv)⌋ with
// M_G the GPU's memory, M_S the model's weights, L the maximum sequence length and m_kv the KV
// bytes per token (all layers). 0 when the model alone does not fit.
double sarathi_max_decodes(double gpu_bytes, double param_bytes, double max_seq_len, double kv_bytes_per_token);

}  // namespace inferlab
