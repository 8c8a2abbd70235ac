// Attention memory by byte accounting (see inferlab/repro/attention_memory.h).
#include "inferlab/repro/attention_memory.h"

#include "inferlab/error.h"

namespace inferlab {

namespace {
// Table 21's accounting, by tensor shape.
constexpr double kHalf = 2, kFloat = 4;
constexpr double kStandardSquareTensors = 4;  // [B, H, N, N] each
constexpr double kStandardLinearTensors = 10; // [B, N, H, d] each
constexpr double kFlashLinearTensors = 13;    // [B, N, H, d] each
constexpr double kFlashRowStatistics = 2;     // [B, H, N] each: m and ℓ
}  // namespace

AttentionMemoryAlgorithm parse_attention_memory_algorithm(const std::string& name, const std::string& where) {
  if (name == "standard") return AttentionMemoryAlgorithm::kStandard;
  if (name == "flash") return AttentionMemoryAlgorithm::kFlash;
  throw Error(where + ": attention memory algorithm '" + name + "'; allowed: standard, flash");
}

double attention_memory_bytes(AttentionMemoryAlgorithm algorithm, const AttentionShape& s) {
  check(s.batch > 0 && s.heads > 0 && s.seq > 0 && s.head_dim > 0, "attention_memory_bytes: B, H, N, d must be > 0");
  const double square = s.batch * s.heads * s.seq * s.seq, linear = s.batch * s.seq * s.heads * s.head_dim,
               rows = s.batch * s.heads * s.seq;
  if (algorithm == AttentionMemoryAlgorithm::kStandard)
    return kStandardSquareTensors * square * kHalf + kStandardLinearTensors * linear * kHalf;
  return kFlashLinearTensors * linear * kHalf + kFlashRowStatistics * rows * kFloat;
}

}  // namespace inferlab
