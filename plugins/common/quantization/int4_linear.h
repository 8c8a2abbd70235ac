// The int4 group-wise linear (format: kernels/ref/matmul_int4.h, kernel: kernels/cpu/matmul_int4)
// shared by every strategy that stores int4 groups: quantization/int4 (round-to-nearest),
// quantization/gptq and quantization/awq (calibrated codes). Codes either come from the
// reference round-to-nearest quantizer or are handed over already chosen.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "inferlab/huge_pages.h"
#include "inferlab/plugin/quantization.h"
#include "kernels/cpu/gemm_int4_panels.h"
#include "kernels/cpu/linear_plan.h"

namespace inferlab {

// The row format of an Int4Linear's codes (kernels/ref/matmul_int4.h).
struct Int4Rows {
  HugeVector<std::uint8_t> packed;  // [out, ceil(in / 2)]
  HugeVector<float> scale;          // [out, groups]
  HugeVector<std::uint8_t> zero;    // [out, groups]; empty when symmetric
};

// How an Int4Linear's activations meet its codes.
enum class Int4Activations {
  kFp32,  // weight-only, fp32 activations (cpu::matmul_int4): the exact products
  kInt16,  // 16-bit activations: int16 per 32-block (an error of at most 2^-16 of the block's
           // largest value, below fp16's rounding), integer dot products (W4A16 on the CPU's VNNI)
  kInt8,   // activations quantised per 32-block, integer dot products (W4A8)
};

// A strategy's `activations` parameter for its int4 linears: "int8", "int16", "fp32" or "auto" (the
// default of quantization/int4, gptq and awq: int8 where group_size is a multiple of 32, being
// the fast path at every row count, else fp32). Throws Error naming the allowed values otherwise.
Int4Activations int4_activations(const std::string& activations, int group_size);
// The parameter value that names it ("fp32", "int16", "int8").
const char* int4_activations_name(Int4Activations activations);
// Throws Error unless group_size suits `activations` (a multiple of 32 where they are quantised
// per 32-block, each block lying in one weight group); `who` names the strategy.
void check_int4_activations(Int4Activations activations, int group_size, const std::string& who);

// How the int4 linears multiply: nibbles unpacked, offset and scaled (3 ops per weight) for a
// float multiply; with int8 activations unpacked (2 ops) for an int8 one; with int16 ones an
// int16 dot on the CPU (a 16-bit float multiply on a simulated GPU).
LinearArithmetic int4_arithmetic(Int4Activations activations);

class Int4Linear : public Linear {
 public:
  // weight: [out, in] fp32, quantized here by round-to-nearest. group_size: a multiple of 8 in
  // [8, 4096].
  Int4Linear(const std::vector<float>& weight, int out, int in, int group_size, bool symmetric);
  // Codes chosen elsewhere: packed [out, ceil(in / 2)], scale [out, G], zero [out, G] or empty
  // (symmetric), G = ceil(in / group_size).
  Int4Linear(int out, int in, int group_size, std::vector<std::uint8_t> packed, std::vector<float> scale,
             std::vector<std::uint8_t> zero);
  // y[n, out] = x[n, in] · W_q^T through kernels/cpu/matmul_int4 (fp32 activations; on AVX2
  // builds without AVX-512 gemm_int4_panels_f32 on the panels), or x
  // quantised per 32-block: int8 through gemm_int4_panels or matmul_int4_act (W4A8), int16
  // through gemm_int4_panels_int16 (without its panels — no AVX-512 VNNI — the int16 blocks'
  // values through matmul_int4; in not a multiple of 32: fp32). The CPU; on a CUDA device
  // an Int4CudaLinear (plugins/common/quantization/int4_linear_cuda.h) runs the same codes.
  void forward(const float* x, float* y, int n, Device& device) const override;
  // The plan's kernel for the activations (kernels/cpu/linear_plan.h: W4A16, W4A16 int16, W4A8).
  std::string cpu_kernel(int rows) const override { return cpu::cpu_kernel_info(plan(rows)).name; }
  cpu::CpuKernel plan(int rows) const;
  // kInt8 and kInt16 quantise activations per 32-block on the fly and throw Error unless
  // group_size is a multiple of 32 (each activation block must lie in one weight group); where
  // this CPU has the kernels and in is a multiple of 32 (cpu::int4_panels_available), the codes
  // move into cpu::gemm_int4_panels' panels of 16 rows (the same bytes; the rows are released, and
  // come back with kFp32 unless the fp32 panels take them: cpu::int4_panels_f32_available).
  // Elsewhere kInt8 takes matmul_int4_act's row stream and kInt16 the fp32 path (exact
  // activations). kFp32 (the default) keeps the activations.
  void set_activations(Int4Activations activations);
  Int4Activations activations() const { return activations_; }
  // out*ceil(in/2) bytes of codes + 4 bytes of scale per group (+ 1 byte of zero point per
  // group when asymmetric).
  std::uint64_t weight_bytes() const override;
  // scale · (code − zero) of the row's groups (ref::dequantize_int4 on one row).
  void dequantize_row(int row, float* out) const override;
  // With int8 activations: matmul_int4_act on blocks quantised by the caller.
  bool reads_act_blocks() const override { return activations_ == Int4Activations::kInt8; }
  void forward_act_blocks(const std::int8_t* xq, const float* xs, float* y, int n, Device& device) const override;

  int group_size() const { return group_size_; }
  int groups() const;  // per row: ceil(in / group_size)
  bool symmetric() const { return symmetric_; }
  // Whether the codes are held as cpu::gemm_int4_panels' panels (else as rows).
  bool holds_panels() const { return panels_.out > 0; }
  // The codes in the row format (rebuilt from the panels when held as panels): what a CUDA
  // device uploads.
  Int4Rows rows() const;
  // The stored rows: empty while the codes are held as panels (holds_panels).
  const HugeVector<std::uint8_t>& packed() const { return rows_.packed; }
  // The weights the codes stand for, [out, in].
  std::vector<float> dequantized() const;

 private:
  int group_size_;
  bool symmetric_;
  // One of the two holds the codes. On 2 MiB pages once large (inferlab/huge_pages.h): decode
  // reads them once per token, and on 4 KiB pages the few-row kernels ran well below the
  // huge-page read probe (docs/kernels.md).
  Int4Rows rows_;
  cpu::Int4Panels panels_;
  Int4Activations activations_ = Int4Activations::kFp32;
};

// Throws Error unless group_size is a multiple of 8 in [8, 4096]; `who` names the strategy.
void check_int4_group_size(int group_size, const std::string& who);

// The asymmetric round-to-nearest grid of one group (the rule of ref::quantize_int4_groups):
// lo = min(min w, 0), hi = max(max w, 0), scale = (hi - lo) / 15, zero = round(-lo / scale).
struct Int4Grid {
  float scale = 0.0f;
  int zero = 0;
  // The code of w on this grid, in [0, 15].
  int code(float w) const;
  float value(int code) const { return scale * static_cast<float>(code - zero); }
};
Int4Grid int4_grid(float lo, float hi);

}  // namespace inferlab
