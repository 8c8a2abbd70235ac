// Memory of attention by byte accounting, as FlashAttention's memory comparison counts it (Dao
// et al., NeurIPS 2022, Appendix E, Table 21: forward + backward of one attention layer, fp16,
// B = 16, H = 8, d = 64): the standard implementation materialises O(N²) per-head matrices, the
// fused one keeps only O(N) softmax statistics beside its O(N·d) tensors. One place for these
// formulas: `inferlab reproduce` (quantity attention_memory_mib) and the tests call it.
#pragma once
#include <string>

namespace inferlab {

enum class AttentionMemoryAlgorithm { kStandard, kFlash };
// "standard" or "flash"; Error naming `where` and the allowed names otherwise.
AttentionMemoryAlgorithm parse_attention_memory_algorithm(const std::string& name, const std::string& where);

struct AttentionShape {
  double batch = 0, heads = 0, seq = 0, head_dim = 0;  // B, H, N, d
};

// Bytes (all terms from Table 21's accounting, 16-bit tensors, fp32 statistics):
//   standard: 4 · B·H·N² · 2  (the N×N score, softmax, dropout-mask and dropped-softmax matrices)
//           + 10 · B·N·H·d · 2 (the O(N·d) activations and gradients)
//   flash:    13 · B·N·H·d · 2 + 2 · B·H·N · 4 (the row max m and row sum ℓ of the softmax, fp32)
double attention_memory_bytes(AttentionMemoryAlgorithm algorithm, const AttentionShape& shape);

}  // namespace inferlab
