// Packing GGUF blocks into gemm_gguf's panels and back (gemm_gguf.h; the layout:
// gemm_gguf_layout.h).
#include <cstring>
#include <string>
#include <vector>

#include "inferlab/error.h"
#include "kernels/cpu/gemm_gguf.h"
#include "kernels/cpu/gemm_gguf_layout.h"
#include "inferlab/gguf_blocks.h"

namespace inferlab::cpu {

using namespace gguf_panels;  // this file's own use of the panel layout

namespace {

// A Q8_0 / Q4_0 / Q4_1 block as the file stores it: fp16 d, (Q4_1) fp16 m, then the codes.
struct SourceBlock {
  std::size_t bytes;  // 34, 18, 20
  int code_offset;    // 2, 2, 4
  int code_bytes;     // 32 int8 codes, or 16 bytes of nibbles
};
SourceBlock source_block(GgmlType t) {
  switch (t) {
    case GgmlType::kQ8_0: return {34, 2, 32};
    case GgmlType::kQ4_0: return {18, 2, 16};
    default: return {20, 4, 16};  // Q4_1
  }
}
// Sub-block c (< 8) of a K-quant super-block: its 32 codes (Q4_K 0..15, Q5_K 0..31, Q6_K 0..63),
// with Q4_K's / Q5_K's 6-bit scale and min or Q6_K's two int8 scales (codes 0-15, 16-31), per
// inferlab/gguf_blocks.h.
struct KSub {
  std::uint8_t code[kBlock];
  std::uint8_t sc[2], m;
};
KSub k_sub(GgmlType t, const std::uint8_t* src, int c) {
  KSub s{};
  if (is_q45k(t)) {
    ref::kq_scale_min(src + 4, c, s.sc[0], s.m);
    for (int l = 0; l < kBlock; ++l)
      s.code[l] = static_cast<std::uint8_t>(t == GgmlType::kQ5_K ? ref::q5k_code(src, c, l) : ref::q4k_code(src, c, l));
  } else {  // Q6_K
    for (int l = 0; l < kBlock; ++l) s.code[l] = static_cast<std::uint8_t>(ref::q6k_code(src, c, l));
    s.sc[0] = src[192 + 2 * c];
    s.sc[1] = src[192 + 2 * c + 1];
  }
  return s;
}
// The inverse: sub-block c's codes and scales written into the super-block `dst` (zeroed first).
void put_k_sub(GgmlType t, const KSub& s, int c, std::uint8_t* dst) {
  if (is_q45k(t)) {
    const int qs = t == GgmlType::kQ5_K ? 48 : 16;
    for (int l = 0; l < kBlock; ++l) {
      dst[qs + 32 * (c / 2) + l] |= static_cast<std::uint8_t>((s.code[l] & 0x0F) << (4 * (c & 1)));
      if (t == GgmlType::kQ5_K) dst[16 + l] |= static_cast<std::uint8_t>((s.code[l] >> 4) << c);
    }
    std::uint8_t* scales = dst + 4;  // kq_scale_min's packing of 6-bit values
    if (c < 4) {
      scales[c] |= s.sc[0];
      scales[c + 4] |= s.m;
    } else {
      scales[c + 4] |= static_cast<std::uint8_t>((s.sc[0] & 0x0F) | ((s.m & 0x0F) << 4));
      scales[c - 4] |= static_cast<std::uint8_t>((s.sc[0] >> 4) << 6);
      scales[c] |= static_cast<std::uint8_t>((s.m >> 4) << 6);
    }
  } else {
    const int h = c / 4, k = c % 4;
    for (int l = 0; l < kBlock; ++l) {
      dst[64 * h + 32 * (k & 1) + l] |= static_cast<std::uint8_t>((s.code[l] & 0x0F) << (4 * (k >> 1)));
      dst[128 + 32 * h + l] |= static_cast<std::uint8_t>((s.code[l] >> 4) << (2 * k));
    }
    dst[192 + 8 * h + 2 * k] = s.sc[0];
    dst[192 + 8 * h + 2 * k + 1] = s.sc[1];
  }
}

}  // namespace

bool gemm_gguf_packs(GgmlType type) {
  return type == GgmlType::kQ8_0 || type == GgmlType::kQ4_0 || type == GgmlType::kQ4_1 || is_kquant(type);
}

std::uint64_t packed_bytes(const PackedGguf& w) { return w.data.size(); }

bool gguf_transcodes_to_q8_0(GgmlType type) { return type == GgmlType::kQ5_0 || type == GgmlType::kIQ4_NL; }

std::vector<std::uint8_t> transcode_to_q8_0(GgmlType type, const std::vector<std::uint8_t>& w) {
  const std::string name = ggml_type_name(static_cast<std::uint32_t>(type));
  check(gguf_transcodes_to_q8_0(type), "transcode_to_q8_0: " + name + " blocks are not Q8_0 blocks (allowed: Q5_0, IQ4_NL)");
  const std::size_t in_bytes = ggml_block_bytes(type), out_bytes = ggml_block_bytes(GgmlType::kQ8_0);
  check(w.size() % in_bytes == 0, "transcode_to_q8_0: " + std::to_string(w.size()) + " bytes are not whole " + name +
                                      " blocks of " + std::to_string(in_bytes));
  const std::size_t blocks = w.size() / in_bytes;
  std::vector<std::uint8_t> q8(blocks * out_bytes);
  for (std::size_t b = 0; b < blocks; ++b) {
    const std::uint8_t* src = w.data() + b * in_bytes;
    std::uint8_t* dst = q8.data() + b * out_bytes;
    dst[0] = src[0];  // the fp16 d as stored
    dst[1] = src[1];
    for (int i = 0; i < kBlock; ++i) {
      const int c = type == GgmlType::kQ5_0 ? ref::q5_code(src + 2, i) - 16 : ref::kIq4Values[ref::split_nibble(src + 2, i)];
      dst[2 + i] = static_cast<std::uint8_t>(static_cast<std::int8_t>(c));
    }
  }
  return q8;
}

PackedGguf pack_gguf(GgmlType type, const std::vector<std::uint8_t>& w, int out, int in) {
  const std::string name = ggml_type_name(static_cast<std::uint32_t>(type));
  check(gemm_gguf_available(), "pack_gguf: this build has neither AVX-512 VNNI nor AVX2 (use matmul_gguf_act)");
  check(gemm_gguf_packs(type), "pack_gguf: no packed kernel for " + name + " (allowed: Q8_0, Q4_0, Q4_1, Q4_K, Q5_K, Q6_K)");
  const int elems = source_block_elems(type);
  check(out > 0 && in > 0 && in % elems == 0, "pack_gguf: out must be positive and in a positive multiple of " +
                                                  std::to_string(elems) + " for " + name + ", got out=" +
                                                  std::to_string(out) + " in=" + std::to_string(in));
  const int blocks = in / kBlock, supers = in / kSuper, panels = (out + kPanel - 1) / kPanel;
  const std::size_t row_bytes = ggml_tensor_bytes(type, static_cast<std::uint64_t>(in));
  check(w.size() == row_bytes * static_cast<std::size_t>(out),
        "pack_gguf: " + std::to_string(w.size()) + " bytes of " + name + " blocks, a [" + std::to_string(out) + ", " +
            std::to_string(in) + "] tensor has " + std::to_string(row_bytes * static_cast<std::size_t>(out)));
  const Layout l = layout(type);
  const std::size_t stride = panel_bytes(type, in);
  PackedGguf packed;
  packed.type = type;
  packed.out = out;
  packed.in = in;
  packed.data.assign(static_cast<std::size_t>(panels) * stride, 0);
  for (int o = 0; o < out; ++o) {
    const int j = o % kPanel;
    std::uint8_t* panel = packed.data.data() + static_cast<std::size_t>(o / kPanel) * stride;
    const std::uint8_t* row = w.data() + static_cast<std::size_t>(o) * row_bytes;
    if (is_kquant(type)) {
      const bool q6 = type == GgmlType::kQ6_K;
      for (int s = 0; s < supers; ++s) {
        const std::uint8_t* src = row + static_cast<std::size_t>(s) * ggml_block_bytes(type);
        std::uint8_t* head = record_head(panel, l, 8 * s);
        ref::store_le16(head + 2 * j, ref::load_le16(src + (q6 ? 208 : 0)));
        if (!q6) ref::store_le16(head + 64 + 2 * j, ref::load_le16(src + 2));
        for (int c = 0; c < kSuper / kBlock; ++c) {
          const KSub sub = k_sub(type, src, c);
          std::uint8_t* slot = block_slot(panel, l, 8 * s + c);
          for (int k = 0; k < 16; ++k)
            slot[packed_offset(l, j, k)] =
                static_cast<std::uint8_t>((sub.code[k] & 0x0F) | ((sub.code[16 + k] & 0x0F) << 4));
          if (q6) {
            for (int k = 0; k < kBlock; ++k)
              plane_base(panel, slot, l, in, 8 * s + c)[high_offset(l, j, k)] |= static_cast<std::uint8_t>((sub.code[k] >> 4) << high_shift(j, k));
            slot[l.scale + j] = sub.sc[0];
            slot[l.scale + 32 + j] = sub.sc[1];
          } else {
            if (type == GgmlType::kQ5_K)
              for (int k = 0; k < kBlock; ++k)
                plane_base(panel, slot, l, in, 8 * s + c)[bit5_offset(l, j, k)] |= static_cast<std::uint8_t>((sub.code[k] >> 4) << bit5_bit(j, k));
            slot[l.scale + j] = sub.sc[0];
            slot[l.scale + 32 + j] = sub.m;
          }
        }
      }
      continue;
    }
    const SourceBlock sb = source_block(type);
    const std::uint8_t flip = type == GgmlType::kQ8_0 ? 0x80 : 0x00;  // c ^ 0x80 = c + 128 as a byte
    for (int b = 0; b < blocks; ++b) {
      const std::uint8_t* src = row + static_cast<std::size_t>(b) * sb.bytes;
      std::uint8_t* head = record_head(panel, l, b);
      ref::store_le16(head + 2 * j, ref::load_le16(src));
      if (type == GgmlType::kQ4_1) ref::store_le16(head + 64 + 2 * j, ref::load_le16(src + 2));
      std::uint8_t* slot = block_slot(panel, l, b);
      for (int k = 0; k < sb.code_bytes; ++k) slot[packed_offset(l, j, k)] = src[sb.code_offset + k] ^ flip;
    }
  }
  return packed;
}

void unpack_gguf_row(const PackedGguf& w, int row, std::uint8_t* bytes) {
  check(row >= 0 && row < w.out, "unpack_gguf_row: row " + std::to_string(row) + " outside [0, " +
                                     std::to_string(w.out) + ")");
  const int blocks = w.in / kBlock, j = row % kPanel;
  const Layout l = layout(w.type);
  const std::uint8_t* panel = w.data.data() + static_cast<std::size_t>(row / kPanel) * panel_bytes(w.type, w.in);
  if (is_kquant(w.type)) {
    const bool q6 = w.type == GgmlType::kQ6_K;
    const int supers = w.in / kSuper;
    const std::size_t super_bytes = ggml_block_bytes(w.type);
    for (int s = 0; s < supers; ++s) {
      std::uint8_t* dst = bytes + static_cast<std::size_t>(s) * super_bytes;
      std::memset(dst, 0, super_bytes);
      const std::uint8_t* head = record_head(panel, l, 8 * s);
      ref::store_le16(dst + (q6 ? 208 : 0), ref::load_le16(head + 2 * j));
      if (!q6) ref::store_le16(dst + 2, ref::load_le16(head + 64 + 2 * j));
      for (int c = 0; c < kSuper / kBlock; ++c) {
        const std::uint8_t* slot = block_slot(panel, l, 8 * s + c);
        KSub sub{};
        for (int k = 0; k < 16; ++k) {
          sub.code[k] = slot[packed_offset(l, j, k)] & 0x0F;
          sub.code[16 + k] = slot[packed_offset(l, j, k)] >> 4;
        }
        if (q6) {
          for (int k = 0; k < kBlock; ++k)
            sub.code[k] |= static_cast<std::uint8_t>(((plane_base(panel, slot, l, w.in, 8 * s + c)[high_offset(l, j, k)] >> high_shift(j, k)) & 3) << 4);
          sub.sc[0] = slot[l.scale + j];
          sub.sc[1] = slot[l.scale + 32 + j];
        } else {
          if (w.type == GgmlType::kQ5_K)
            for (int k = 0; k < kBlock; ++k)
              sub.code[k] |= static_cast<std::uint8_t>(((plane_base(panel, slot, l, w.in, 8 * s + c)[bit5_offset(l, j, k)] >> bit5_bit(j, k)) & 1) << 4);
          sub.sc[0] = slot[l.scale + j];
          sub.m = slot[l.scale + 32 + j];
        }
        put_k_sub(w.type, sub, c, dst);
      }
    }
    return;
  }
  const SourceBlock sb = source_block(w.type);
  const std::uint8_t flip = w.type == GgmlType::kQ8_0 ? 0x80 : 0x00;
  for (int b = 0; b < blocks; ++b) {
    std::uint8_t* dst = bytes + static_cast<std::size_t>(b) * sb.bytes;
    const std::uint8_t* head = record_head(panel, l, b);
    ref::store_le16(dst, ref::load_le16(head + 2 * j));
    if (w.type == GgmlType::kQ4_1) ref::store_le16(dst + 2, ref::load_le16(head + 64 + 2 * j));
    const std::uint8_t* slot = block_slot(panel, l, b);
    for (int k = 0; k < sb.code_bytes; ++k) dst[sb.code_offset + k] = slot[packed_offset(l, j, k)] ^ flip;
  }
}

}  // namespace inferlab::cpu
