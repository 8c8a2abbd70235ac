// int4 groups of 32 stored as GGML Q4_0 / Q4_1 blocks in cpu::gemm_gguf's 32-row panels, for
// the int4 strategy with int8 activations on AVX-512 VNNI builds (the format llama.cpp's Q4_0
// decode reads, run by the same VNNI GEMM as quantization/gguf). The quantiser is the strategy's
// round-to-nearest with its scales (and the asymmetric offset) held in fp16:
//  - symmetric, Q4_0 (18 bytes / 32 weights): d = the smallest fp16 >= max|w| / 7 and
//    c = round(w / d) + 8, so q = c - 8 in [-7, 7] and w_hat = d * (c - 8);
//  - asymmetric, Q4_1 (20 bytes / 32 weights): [lo, hi] = [min(min w, 0), max(max w, 0)],
//    d = the smallest fp16 >= (hi - lo) / 15, the zero point z = round(-lo / d), and m the fp16
//    nearest -d * z inside [hi - 15.5 d, lo + 0.5 d]; c = clamp(round((w - m) / d), 0, 15) and
//    w_hat = d * c + m (0 is exact whenever d * z is an fp16 value, e.g. d a power of two).
// The codes are chosen against the stored fp16 d and m, so |w - w_hat| <= d / 2 for every weight
// (the grid covers [lo - d/2, hi + d/2]); an all-zero block gets d = m = 0 and stays exactly 0.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "inferlab/plugin/quantization.h"
#include "kernels/cpu/gemm_gguf.h"
#include "kernels/cpu/linear_plan.h"

namespace inferlab::plugins {

// w [out, in] (in a multiple of 32) -> `out` rows of Q4_0 (symmetric) or Q4_1 blocks, by the rule
// above. nullopt when a block's d or m does not fit in fp16 (|d| or |m| above 65504) or w is
// not finite: the caller keeps the fp32-scale format then. Throws Error for in not a positive
// multiple of 32 or w not holding out * in values.
std::optional<std::vector<std::uint8_t>> quantize_q4_blocks(const std::vector<float>& w, int out, int in,
                                                            bool symmetric);

class Q4PanelLinear : public Linear {
 public:
  // blocks: `out` rows of Q4_0 / Q4_1 blocks (quantize_q4_blocks), repacked by cpu::pack_gguf.
  // Throws Error where pack_gguf does (no VNNI, in not a multiple of 32, wrong byte count).
  Q4PanelLinear(bool symmetric, const std::vector<std::uint8_t>& blocks, int out, int in);
  // y[n, out] = x[n, in] · W_hatᵀ with x quantised per 32-block (cpu::quantize_act_rows) and
  // cpu::gemm_gguf.
  void forward(const float* x, float* y, int n, Device& device) const override;
  // The plan's kernel for the GGUF Q4_0 / Q4_1 blocks (kernels/cpu/linear_plan.h).
  std::string cpu_kernel(int rows) const override { return cpu::cpu_kernel_info(plan(rows)).name; }
  cpu::CpuKernel plan(int rows) const {
    return cpu::plan_cpu_linear(cpu::CpuFormat::kGguf, rows,
                                cpu::CpuLinearShape{.out = out_features(), .in = in_features(), .type = packed_.type},
                                cpu::CpuIsa::host());
  }
  bool reads_act_blocks() const override { return true; }
  // xq [n, in], xs [n, in / 32]: cpu::gemm_gguf directly.
  void forward_act_blocks(const std::int8_t* xq, const float* xs, float* y, int n, Device& device) const override;
  // On the CPU, a group of Q4PanelLinears (Q4_0 and Q4_1 may mix) runs as one
  // cpu::gemm_gguf_group, x quantised once; any other group: false. forward is the group of one.
  bool try_forward_group(std::span<const GroupMember> group, const float* x, int n, Device& device) const override;
  bool try_forward_group_act_blocks(std::span<const GroupMember> group, const std::int8_t* xq, const float* xs, int n,
                                    Device& device) const override;
  // Row `row` of W_hat, exactly the values gemm_gguf multiplies with (the row's blocks unpacked
  // from the panel and decoded: d * (c - 8), or d * c + m, each exact in fp32).
  void dequantize_row(int row, float* out) const override;
  // The blocks of the `out` rows: 18 (Q4_0) or 20 (Q4_1) bytes per 32 weights, 4.5 / 5.0 bits
  // (the panels' scales included). Not counted: the zero rows padding the last panel to 32 rows
  // (cpu::packed_bytes counts them; none when out is a multiple of 32, as in the models' layers),
  // which would make a 5-row layer look like 32 bits per weight.
  std::uint64_t weight_bytes() const override;

  bool symmetric() const { return packed_.type == GgmlType::kQ4_0; }
  const cpu::PackedGguf& panels() const { return packed_; }
  // The fp16 step d of each block as a float, [out, in / 32].
  std::vector<float> scales() const;

 private:
  cpu::PackedGguf packed_;
};

}  // namespace inferlab::plugins
