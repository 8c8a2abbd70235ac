#include "q4_panel_linear.h"

#include <algorithm>
#include <atomic>
#include <cmath>

#include "inferlab/error.h"
#include "inferlab/thread_pool.h"
#include "inferlab/formats/formats.h"
#include "kernels/cpu/matmul_int8_act.h"
#include "inferlab/gguf_blocks.h"

namespace inferlab::plugins {

namespace {

constexpr int kBlock = ref::kGgufBlock;  // 32 weights per Q4_0 / Q4_1 block

// The fp16 one step up (+1) or down (-1) from h (h finite); ±0 both step to ±the smallest
// subnormal. Halves of one sign are ordered like their bit patterns.
std::uint16_t fp16_step(std::uint16_t h, int dir) {
  const bool negative = (h & 0x8000u) != 0, zero = (h & 0x7FFFu) == 0;
  if (zero) return dir > 0 ? std::uint16_t{0x0001} : std::uint16_t{0x8001};
  const bool away_from_zero = (dir > 0) != negative;
  return static_cast<std::uint16_t>(away_from_zero ? h + 1 : h - 1);
}

// The fp16 nearest v, moved one step at a time into [lo, hi] if rounding left it outside
// (callers pass an interval holding several fp16 values, so this ends at once).
std::uint16_t fp16_within(double v, double lo, double hi) {
  std::uint16_t h = fp32_to_fp16(static_cast<float>(v));
  while (std::isfinite(fp16_to_fp32(h)) && fp16_to_fp32(h) < lo) h = fp16_step(h, +1);
  while (std::isfinite(fp16_to_fp32(h)) && fp16_to_fp32(h) > hi) h = fp16_step(h, -1);
  return h;
}

// Element i < 16 in the low nibble of byte i, element 16 + i in the high nibble.
void put_nibbles(const int* c, std::uint8_t* qs) {
  for (int i = 0; i < kBlock / 2; ++i) qs[i] = static_cast<std::uint8_t>(c[i] | (c[i + kBlock / 2] << 4));
}

// One block of 32 weights as Q4_0 (18 bytes at dst); false when d does not fit in fp16.
bool quantize_q4_0_block(const float* w, std::uint8_t* dst) {
  double a = 0.0;
  for (int i = 0; i < kBlock; ++i) a = std::max(a, std::fabs(static_cast<double>(w[i])));
  // The smallest half >= a / 7: no weight lies beyond 7 d, so no code clamps past d / 2.
  const std::uint16_t dh = fp16_within(a / 7.0, a / 7.0, HUGE_VAL);
  const double d = fp16_to_fp32(dh);
  if (!std::isfinite(d)) return false;
  int c[kBlock];
  for (int i = 0; i < kBlock; ++i)
    c[i] = d > 0.0 ? static_cast<int>(std::clamp(std::lround(w[i] / d), -7L, 7L)) + 8 : 8;
  ref::store_le16(dst, dh);
  put_nibbles(c, dst + 2);
  return true;
}

// One block of 32 weights as Q4_1 (20 bytes at dst); false when d or m does not fit in fp16.
bool quantize_q4_1_block(const float* w, std::uint8_t* dst) {
  double lo = 0.0, hi = 0.0;
  for (int i = 0; i < kBlock; ++i) {
    lo = std::min(lo, static_cast<double>(w[i]));
    hi = std::max(hi, static_cast<double>(w[i]));
  }
  const std::uint16_t dh = fp16_within((hi - lo) / 15.0, (hi - lo) / 15.0, HUGE_VAL);
  const double d = fp16_to_fp32(dh);
  if (!std::isfinite(d)) return false;
  // The grid [m, m + 15 d] covers [lo, hi] to within d / 2 at both ends for any m in
  // [hi - 15.5 d, lo + 0.5 d] (an interval >= d wide, since 15 d >= hi - lo); -d z is in it.
  const long z = d > 0.0 ? std::clamp(std::lround(-lo / d), 0L, 15L) : 0L;
  const std::uint16_t mh = fp16_within(-d * static_cast<double>(z), hi - 15.5 * d, lo + 0.5 * d);
  const double m = fp16_to_fp32(mh);
  if (!std::isfinite(m)) return false;
  int c[kBlock];
  for (int i = 0; i < kBlock; ++i)
    c[i] = d > 0.0 ? static_cast<int>(std::clamp(std::lround((w[i] - m) / d), 0L, 15L)) : 0;
  ref::store_le16(dst, dh);
  ref::store_le16(dst + 2, mh);
  put_nibbles(c, dst + 4);
  return true;
}

GgmlType q4_type(bool symmetric) { return symmetric ? GgmlType::kQ4_0 : GgmlType::kQ4_1; }

}  // namespace

std::optional<std::vector<std::uint8_t>> quantize_q4_blocks(const std::vector<float>& w, int out, int in,
                                                            bool symmetric) {
  const std::size_t count = static_cast<std::size_t>(std::max(out, 0)) * static_cast<std::size_t>(std::max(in, 0));
  check(out > 0 && in > 0 && in % kBlock == 0 && w.size() == count,
        "quantization 'int4': Q4 blocks need in a positive multiple of 32 and out*in weights, got " +
            std::to_string(w.size()) + " values for [" + std::to_string(out) + ", " + std::to_string(in) + "]");
  const GgmlType type = q4_type(symmetric);
  const std::size_t block_bytes = ggml_tensor_bytes(type, kBlock);
  if (!std::all_of(w.begin(), w.end(), [](float v) { return std::isfinite(v); })) return std::nullopt;
  std::vector<std::uint8_t> blocks(count / kBlock * block_bytes);
  std::atomic<bool> all_fit{true};
  ThreadPool pool;  // blocks across all cores at load: each block is its own
  pool.parallel_for(count / kBlock, [&](std::size_t b0, std::size_t b1) {
    for (std::size_t b = b0; b < b1 && all_fit.load(std::memory_order_relaxed); ++b) {
      const bool fits = symmetric ? quantize_q4_0_block(w.data() + b * kBlock, blocks.data() + b * block_bytes)
                                  : quantize_q4_1_block(w.data() + b * kBlock, blocks.data() + b * block_bytes);
      if (!fits) all_fit.store(false, std::memory_order_relaxed);
    }
  }, 512);
  if (!all_fit.load()) return std::nullopt;
  return blocks;
}

Q4PanelLinear::Q4PanelLinear(bool symmetric, const std::vector<std::uint8_t>& blocks, int out, int in)
    : Linear(out, in), packed_(cpu::pack_gguf(q4_type(symmetric), blocks, out, in)) {}

namespace {

// The group's panels when every member is a Q4PanelLinear, which runs on the CPU only
// (gemm_gguf_group's operands, filled into `out`); false otherwise.
bool q4_group(std::span<const GroupMember> group, std::vector<cpu::GemmGgufOutput>& out) {
  out.clear();
  for (const GroupMember& m : group) {
    const auto* q = dynamic_cast<const Q4PanelLinear*>(m.linear);
    if (q == nullptr) return false;
    out.push_back({&q->panels(), m.y});
  }
  return true;
}

}  // namespace

void Q4PanelLinear::forward(const float* x, float* y, int n, Device& device) const {
  const GroupMember self{this, y};  // the group of one: x quantised, then gemm_gguf
  check(try_forward_group(std::span<const GroupMember>(&self, 1), x, n, device),
        "int4 linear: Q4 panels run on the CPU device only (allowed: [device] kind = \"cpu\")");
}

void Q4PanelLinear::forward_act_blocks(const std::int8_t* xq, const float* xs, float* y, int n, Device& device) const {
  cpu::gemm_gguf(xq, xs, packed_, y, n, cpu_pool(device, "int4 linear"));
}

bool Q4PanelLinear::try_forward_group(std::span<const GroupMember> group, const float* x, int n, Device& device) const {
  thread_local std::vector<cpu::GemmGgufOutput> members;
  if (!q4_group(group, members)) return false;
  ThreadPool& pool = cpu_pool(device, "int4 linear");
  thread_local std::vector<std::int8_t> xq;  // [n, in]: quantised once for the group
  thread_local std::vector<float> xs;        // [n, in / 32]
  const int in = in_features();
  xq.resize(static_cast<std::size_t>(n) * in);
  xs.resize(static_cast<std::size_t>(n) * (in / kBlock));
  cpu::quantize_act_rows(x, n, in, xq.data(), xs.data(), pool);
  cpu::gemm_gguf_group(xq.data(), xs.data(), members, n, pool);
  return true;
}

bool Q4PanelLinear::try_forward_group_act_blocks(std::span<const GroupMember> group, const std::int8_t* xq,
                                                 const float* xs, int n, Device& device) const {
  thread_local std::vector<cpu::GemmGgufOutput> members;
  if (!q4_group(group, members)) return false;
  cpu::gemm_gguf_group(xq, xs, members, n, cpu_pool(device, "int4 linear"));
  return true;
}

void Q4PanelLinear::dequantize_row(int row, float* out) const {
  check_linear_row(*this, row, "int4 linear");
  thread_local std::vector<std::uint8_t> bytes;  // [row bytes]: the row's blocks
  bytes.resize(ggml_tensor_bytes(packed_.type, static_cast<std::uint64_t>(in_features())));
  cpu::unpack_gguf_row(packed_, row, bytes.data());
  dequantize(packed_.type, bytes.data(), static_cast<std::size_t>(in_features()), out);
}

std::uint64_t Q4PanelLinear::weight_bytes() const {
  return static_cast<std::uint64_t>(out_features()) *
         ggml_tensor_bytes(packed_.type, static_cast<std::uint64_t>(in_features()));
}

std::vector<float> Q4PanelLinear::scales() const {
  const int out = out_features(), blocks = in_features() / kBlock;
  const std::size_t block_bytes = ggml_block_bytes(packed_.type);
  std::vector<std::uint8_t> bytes(ggml_tensor_bytes(packed_.type, static_cast<std::uint64_t>(in_features())));
  std::vector<float> s(static_cast<std::size_t>(out) * blocks);
  for (int o = 0; o < out; ++o) {
    cpu::unpack_gguf_row(packed_, o, bytes.data());  // the row's Q4_0 / Q4_1 blocks: fp16 d first
    for (int b = 0; b < blocks; ++b) {
      const std::uint8_t* block = bytes.data() + static_cast<std::size_t>(b) * block_bytes;
      s[static_cast<std::size_t>(o) * blocks + b] = fp16_to_fp32(ref::load_le16(block));
    }
  }
  return s;
}

}  // namespace inferlab::plugins
