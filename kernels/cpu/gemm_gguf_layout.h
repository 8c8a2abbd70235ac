// The byte layout of gemm_gguf's packed panels (PackedGguf, gemm_gguf.h), shared by the packer
// (gemm_gguf_pack.cpp) and the kernels (gemm_gguf.cpp): where a panel's records, slots, code
// steps and high-bit planes sit. Internal to kernels/cpu.
#pragma once
#include <cstddef>

#include "inferlab/ggml_types.h"

namespace inferlab::cpu::gguf_panels {

constexpr int kPanel = 32;   // weight rows per panel: two zmm of s32 lanes
constexpr int kBlock = 32;   // inputs per GGUF block and per activation block
constexpr int kSuper = 256;  // inputs per K-quant super-block

constexpr bool is_kquant(GgmlType t) { return t == GgmlType::kQ4_K || t == GgmlType::kQ5_K || t == GgmlType::kQ6_K; }
// Q4_K and Q5_K: Q4_1-like sub-blocks (scale d * sc_j, min -dmin * m_j); Q5_K adds a fifth bit.
constexpr bool is_q45k(GgmlType t) { return t == GgmlType::kQ4_K || t == GgmlType::kQ5_K; }
inline int source_block_elems(GgmlType t) { return is_kquant(t) ? kSuper : kBlock; }

// Where a panel's bytes sit (PackedGguf::data, gemm_gguf.h): records of one block (Q8_0, Q4_0,
// Q4_1) or one super-block of 8 (the K-quants); a record is a head (the 32 rows' fp16 d, then
// Q4_1's fp16 m or the K-quants' dmin) and its blocks' slots. A slot holds its bytes in the
// order packed_tile (and the prefill unpacker) reads them, so a panel is read front to back: groups of steps (a step:
// 128 bytes of codes, 4 inputs x 32 rows), each group led by the high-plane line its steps read
// (Q5_K: one per 2 steps), then the K-quants' per-block scale bytes, which the epilogue reads
// last. Q6_K's top-2-bit plane (a line per step) is the exception: it follows the panel's
// records as a second stream, since in its slots it made cold decode slower (11-12 GB/s against
// 14-23 for the split; Zen 4, 2026-12-02). Every size is a multiple of 64.
struct Layout {
  int blocks_per_record;  // 1, or 8 (K-quants)
  std::size_t head;       // bytes before the first slot: 64 per fp16 row vector
  std::size_t slot;       // bytes per 32-block
  int group_steps;        // steps per group
  std::size_t group;      // bytes per group: the high-plane line (if any), then the codes
  std::size_t pre;        // the high-plane bytes leading a group (0 or 64)
  std::size_t scale;      // the K-quants' scale bytes' offset in a slot
  std::size_t line;       // from one high-plane line to the next
  std::size_t apart = 0;  // high-plane bytes per block held after the panel's records (0: in the slot)
  constexpr std::size_t record() const { return head + static_cast<std::size_t>(blocks_per_record) * slot; }
  // Offset in a slot of step s's codes, and of group i's high-plane line.
  constexpr std::size_t code(int s) const {
    return static_cast<std::size_t>(s / group_steps) * group + pre + static_cast<std::size_t>(s % group_steps) * 128;
  }
  constexpr std::size_t plane(int i) const { return static_cast<std::size_t>(i) * line; }
};
constexpr Layout layout(GgmlType t) {
  switch (t) {
    case GgmlType::kQ8_0: return {1, 64, 1024, 8, 1024, 0, 0, 0};
    case GgmlType::kQ4_0: return {1, 64, 512, 4, 512, 0, 0, 0};
    case GgmlType::kQ4_1: return {1, 128, 512, 4, 512, 0, 0, 0};
    case GgmlType::kQ4_K: return {8, 128, 576, 4, 512, 0, 512, 0};    // codes, sc[32], m[32]
    case GgmlType::kQ5_K: return {8, 128, 704, 2, 320, 64, 640, 320};  // 2 x (bit-5 line, 2 steps), sc, m
    default: return {8, 64, 576, 4, 512, 0, 512, 64, 256};            // Q6_K: codes, sc[2][32]; top bits apart
  }
}
// Bytes of one panel: its records over `in` inputs.
inline std::size_t panel_bytes(GgmlType t, int in) {
  const Layout l = layout(t);
  return static_cast<std::size_t>(in / (kBlock * l.blocks_per_record)) * l.record() +
         static_cast<std::size_t>(in / kBlock) * l.apart;
}
// Where block b's high plane starts (plane(i) is added to it): in its slot, or apart.
template <class Byte>
Byte* plane_base(Byte* panel, Byte* slot, const Layout& l, int in, int b) {
  if (l.apart == 0) return slot;
  return panel + static_cast<std::size_t>(in / (kBlock * l.blocks_per_record)) * l.record() + static_cast<std::size_t>(b) * l.apart;
}
// The head and the slot of (panel, block b) in a panel's stream at `panel`.
template <class Byte>
Byte* record_head(Byte* panel, const Layout& l, int b) {
  return panel + static_cast<std::size_t>(b / l.blocks_per_record) * l.record();
}
template <class Byte>
Byte* block_slot(Byte* panel, const Layout& l, int b) {
  return record_head(panel, l, b) + l.head + static_cast<std::size_t>(b % l.blocks_per_record) * l.slot;
}
// Where code byte k of row j lives in its block's slot: byte k holds code k (Q8_0) or codes k
// and 16 + k (the others), so step k / 4, lane j, byte k % 4.
inline std::size_t packed_offset(const Layout& l, int j, int k) { return l.code(k / 4) + static_cast<std::size_t>(j) * 4 + k % 4; }
// Q6_K's top-2-bit plane: the byte (in step (k % 16) / 4's line) and the shift of code k (< 16:
// the low nibble's code, else the high one's) of row j.
inline std::size_t high_offset(const Layout& l, int j, int k) { return l.plane((k % 16) / 4) + (j % 16) * 4 + k % 4; }
inline int high_shift(int j, int k) { return (j / 16) * 4 + (k / 16) * 2; }
// Q5_K's fifth-bit plane: steps 2i and 2i + 1 share the line of group i, byte (j % 16) * 4 +
// k % 4; the bit of code k of row j is bit5_bit(j, k) of it.
inline std::size_t bit5_offset(const Layout& l, int j, int k) { return l.plane((k % 16) / 8) + (j % 16) * 4 + k % 4; }
inline int bit5_bit(int j, int k) { return (((k % 16) / 4) % 2) * 4 + (j / 16) * 2 + k / 16; }

}  // namespace inferlab::cpu::gguf_panels
