// Register-blocked int8 GEMM on GGUF Q8_0 / Q4_0 / Q4_1 / Q4_K / Q5_K / Q6_K blocks against int8
// activation blocks of 32 (cpu::quantize_act_rows: llama.cpp's Q8_0 activation block), built on
// AVX-512 VNNI `vpdpbusd` (u8 x s8, four products summed into each s32 lane):
//  - the blocks are repacked once (at load) into panels of 32 output rows: per 32-input block,
//    the codes as [steps][32 rows][4 inputs] so one 64-byte load holds 4 consecutive codes of
//    16 rows (vpdpbusd's operand layout), with the 32 rows' fp16 scales (and Q4_1 mins) as
//    stored, all of a panel in one stream (PackedGguf below). Q4_0 / Q4_1 keep their nibbles: byte t of step s holds code 4s + t (low nibble) and
//    code 16 + 4s + t (high nibble), so the panel is a byte transpose of the file's blocks;
//  - a micro-tile holds R <= 6 token rows x 32 weight rows: per block, 8 vpdpbusd steps into
//    int32 lanes (one lane per weight row), then one conversion and one FMA by d_w * d_x; the
//    activations are packed once per call into tiles of 6 rows interleaved per step, with their
//    block scales and sums (kernels/cpu/act_tiles.h), read through one pointer (one row alone,
//    decode, as it is);
//  - the weight codes are always vpdpbusd's unsigned operand against the signed activations:
//    Q8_0's signed codes are stored as c + 128 (a flip of the top bit), and -128 * sum(x) of the
//    block starts the integer lanes (sum(x) is per token row and block, shared by all 32 rows,
//    so the panel stores nothing for it); Q4's codes c (0..15) as they are: Q4_0 w = d (c - 8)
//    starts at -8 * sum(x); Q4_1 w = d c + m adds m * d_x * sum(x) in fp32;
//  - the K-quants run as 32-blocks too. Q4_K: each sub-block of 32 is a Q4 block whose scale is
//    d * sc_j and whose min is -dmin * m_j; the panel keeps d and dmin per super-block (fp16, as
//    stored) and sc_j, m_j per 32-block as one byte per row, so a row's 144 bytes become 148 (the
//    12 bytes of packed 6-bit scales become 16). Q5_K: Q4_K's panel plus a plane of the codes'
//    fifth bits (per pair of steps 64 bytes: bit (s % 2) * 4 + 2 * (rows 16-31) + (high nibble)
//    of byte 4j + t), or-ed in as bit 4 with a 16-bit shift and a mask per zmm: 180 bytes per
//    row and super-block against the file's 176. Q6_K: the low nibbles of the 6-bit codes in the
//    Q4 layout plus a plane of their top 2 bits (per step 64 bytes: bits 0-1 / 2-3 the codes of
//    the low / high nibble of rows 0-15, bits 4-7 those of rows 16-31), d per super-block and the
//    int8 scale of each 16 per row: exactly the file's 210 bytes per row. A Q6_K block's halves
//    (codes 0-15 and 16-31: the low and high nibbles) run one after the other, each folded into
//    the fp32 sums with its own scale d * sc, its int32 lanes started at -32 * (its 16
//    activations' sum);
//  - threads split the panels; decode (one token row) and small batches (under 4 tiles) read
//    the packed panels as they are, unpacking codes in registers while the panel streams in;
//    decode runs two panels at once (Q8_0, Q6_K; every type on Intel cores), or, for Q4_0,
//    Q4_1, Q4_K and Q5_K on AMD's, one panel at a time with two int32 chains per zmm (one
//    stream per thread); the AVX2 decode tiles prefetch their panel 2 KiB ahead
//    (kernels/cpu/decode_prefetch.h; the VNNI tiles do not: not measured on a VNNI machine);
//  - prefill (4 tiles or more) unpacks each panel once into plain codes in Q8_0's layout (1 KiB
//    per 32-block; Q8_0's own slots are read in place) and its scales into fp32 (d, d sc_j, and
//    the mins' -dmin m_j), per thread, so the nibble unpacking, Q5_K's fifth bits and Q6_K's
//    top bits are paid once per panel, not once per 6-row tile; every type then runs the same
//    tile loop (8 vpdpbusd per block and tile element, one fp32 fold; Q6_K one per half); the
//    AVX2 tiles unpack the K-quants' codes alone (gemm_gguf_avx2.cpp), set_gemm_gguf_unpack
//    below switches both off for measurement;
//  - where AMX runs (kernels/cpu/amx.h: Sapphire Rapids and later, granted by Linux), prefill of
//    16 rows and more of every type but Q6_K runs on the tile unit instead (the tile loop:
//    kernels/cpu/amx_blocks.h, shared with gemm_panels_int8): the unpacked panel
//    is `tdpbsud`'s K x 16 operand as it is, the activations are copied once per call into runs
//    of 16 rows x 32 inputs, and each 16 x 16 x 32 tile product's int32 sums are folded into
//    fp32 as the VNNI tiles fold theirs, so both give the same bits (tested);
//  - gemm_gguf_group runs several matrices reading the same activations (wq/wk/wv, w1/w3) as one
//    parallel_for: the union of their panels is cut into one contiguous run of about equal bytes
//    per thread (the matrices may differ in size and type), so a small matrix pays no hand-off
//    of its own and the activation tiles are packed once.
// Bytes held: exactly the file's blocks (Q4_K: 148 per 144, Q5_K: 180 per 176), plus the zero
// rows that pad `out` to a multiple of 32; each panel one stream (PackedGguf below).
// Roofline: 2 * n * out * in int ops per call against the vpdpbusd peak
// (`inferlab_bench --benchmark_filter=PeakInt8Dot`); GFLOP/s: --benchmark_filter=gemm_gguf.
// Parity with the block reference: tests/kernels/test_gemm_gguf.cpp. Builds without AVX-512
// VNNI (compile-time, -march=native) but with AVX2 run the same panels through
// kernels/cpu/gemm_gguf_avx2.cpp (`vpmaddubsw`, int16 block sums; docs/kernels.md); builds with
// neither do not have the kernel: gemm_gguf_available() is false and callers keep
// matmul_gguf_act.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "inferlab/ggml_types.h"
#include "inferlab/huge_pages.h"
#include "inferlab/thread_pool.h"

namespace inferlab::cpu {

// True when this build has the kernel (AVX-512 VNNI, or AVX2 + FMA + F16C).
bool gemm_gguf_available();
// True when gemm_gguf of n token rows of a matrix of `type` runs on the AMX tiles
// (kernels/cpu/amx.h: built with AMX int8, granted by the kernel, switched on) rather than the
// VNNI ones: 16 rows and more, every packed type but Q6_K.
bool gemm_gguf_uses_amx(GgmlType type, int n);
// True for the block types it packs: Q8_0, Q4_0, Q4_1, Q4_K, Q5_K, Q6_K.
bool gemm_gguf_packs(GgmlType type);

// Whether prefill unpacks each panel once per thread before its token tiles pass (the default;
// VNNI: every type, AVX2: the K-quants) or runs the packed tiles that batched decode runs. Both
// give the same bits (tested); the switch is there to measure what the unpacking buys
// (`inferlab_bench --benchmark_filter=gemm_gguf_unpack`; per matrix: PackedGguf::unpack).
// Returns the setting before.
bool set_gemm_gguf_unpack(bool on);
bool gemm_gguf_unpack_enabled();

// Panel p (rows [32p, 32p + 32), zero rows past out) is one contiguous run of `data`, read front
// to back (two such runs at once at decode), where it was six arrays: with the scale bytes in
// arrays of their own a decode thread read up to six streams per panel, and cold Q4_K / Q5_K
// decode ran at 0.6-0.75 of the read bandwidth. A panel is a run of records, one per block
// (Q8_0, Q4_0, Q4_1) or per super-block (the K-quants):
//  - a head: the 32 rows' fp16 d (64 bytes), then Q4_1's fp16 m or Q4_K's / Q5_K's fp16 dmin
//    (64 bytes; Q8_0, Q4_0 and Q6_K have none);
//  - then one slot per 32-block: the codes (1024 bytes for Q8_0, held as c + 128; 512 of nibbles
//    for the others; Q5_K's fifth-bit plane, 128 bytes, as a line before each pair of steps),
//    then Q4_K's / Q5_K's sc bytes [32 rows] and m bytes [32 rows], or Q6_K's int8 scales
//    [2 halves][32 rows];
//  - Q6_K's top-2-bit plane (256 bytes per block) follows the panel's records: a second stream.
// Record bytes: Q8_0 1088, Q4_0 576, Q4_1 640, Q4_K 4736, Q5_K 5760, Q6_K 4672 (+ 2048 apart);
// every offset a multiple of 64, the vector loads aligned.
struct PackedGguf {
  GgmlType type = GgmlType::kQ8_0;
  int out = 0, in = 0;
  HugeVector<std::uint8_t> data;  // [panels][records]; on 2 MiB pages once large (inferlab/huge_pages.h)
  // Whether this matrix's prefill unpacks its panels (as set_gemm_gguf_unpack, per matrix; both
  // must allow it): quantization/gguf's `unpack` parameter, so one run can compare the two.
  bool unpack = true;
};

// Bytes held by the packed blocks.
std::uint64_t packed_bytes(const PackedGguf& w);

// Repacks w [out, in] (out rows of ggml_tensor_bytes(type, in) bytes). Throws inferlab::Error
// for other types, non-positive sizes, in not a multiple of the type's block (32, or 256 for the
// K-quants), a wrong byte count, or where
// the kernel is not available.
PackedGguf pack_gguf(GgmlType type, const std::vector<std::uint8_t>& w, int out, int in);

// Q5_0 and IQ4_NL blocks are Q8_0 blocks in fewer bytes: per 32 weights an fp16 d and codes
// whose values c (Q5_0: q - 16 in -16..15; IQ4_NL: its grid value in -127..113) fit int8, w = d c.
// transcode_to_q8_0 writes them as Q8_0 blocks (d, c), so pack_gguf(kQ8_0, ...) runs them on the
// panels with the same integer dot products (exact: Σ c x in int32, then d_w d_x), at 34 bytes
// per block against the file's 22 / 18; dequantising a transcoded block gives the file's values
// bit for bit (d * c). True for the types it takes.
bool gguf_transcodes_to_q8_0(GgmlType type);
// w [blocks of `type`] -> Q8_0 blocks (34 bytes each). Throws Error for another type or a byte
// count that is not whole blocks.
std::vector<std::uint8_t> transcode_to_q8_0(GgmlType type, const std::vector<std::uint8_t>& w);

// Row `row`'s blocks as the file stored them (ggml_tensor_bytes(type, in) bytes into `bytes`).
void unpack_gguf_row(const PackedGguf& w, int row, std::uint8_t* bytes);

// y[n, out] = x · Wᵀ for xq [n, in], xs [n, in / 32] from cpu::quantize_act_rows (block 32):
// codes in [-127, 127] (the AVX2 tiles' Q8_0 sign trick and int16 sums rely on it).
// n <= 0 is a no-op.
void gemm_gguf(const std::int8_t* xq, const float* xs, const PackedGguf& w, float* y, int n, ThreadPool& pool);

// One matrix of a group: y [n, w->out].
struct GemmGgufOutput {
  const PackedGguf* w;
  float* y;
};
// Every member's y = x · Wᵀ (as gemm_gguf on each, bit for bit) in one pool dispatch (none when
// the whole group is less than one grain of work: it then runs on the caller). The members share
// in (throws inferlab::Error otherwise); their types and out may differ. n <= 0 is a no-op.
void gemm_gguf_group(const std::int8_t* xq, const float* xs, std::span<const GemmGgufOutput> group, int n,
                     ThreadPool& pool);

}  // namespace inferlab::cpu
