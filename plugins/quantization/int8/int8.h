// int8 quantization, per output channel, symmetric (the LLM.int8()/TensorRT-LLM "W8A16"
// scheme without outlier decomposition): each row of W gets scale = max|w_row| / 127 and
// q = round(w / scale). Weight memory falls about 4x, which is what a bandwidth-bound decode step
// pays for. Activations stay fp32 (activations = "fp32"), are held as int16 per 32-block
// (activations = "int16": 16-bit activations, W8A16 in integers, kernels/cpu/gemm_w8_int16.h),
// or are quantised on the fly to int8 blocks of 32 with one scale each (activations = "int8":
// dynamic W8A8, integer dot products); the KV cache stays fp32.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "inferlab/huge_pages.h"
#include "inferlab/plugin/quantization.h"
#include "kernels/cpu/gemm_panels_int8.h"
#include "kernels/cpu/gemm_panels_w8.h"
#include "kernels/cpu/gemm_w8_int16.h"
#include "kernels/cpu/linear_plan.h"

namespace inferlab::plugins {

// How the int8 linears' activations are held (the `activations` parameter).
enum class Int8Activations { kFp32, kInt16, kInt8 };

// The parameter's value on the CPU: "fp32", "int16", "int8", or "auto" (the default): int16 on
// builds with AVX2 or AVX-512, where its kernel is the faster one from 4 rows and at prefill
// (docs/kernels.md, "W8A16 in integers"), fp32 on the portable build. Throws Error on any other
// value.
Int8Activations int8_cpu_activations(const std::string& activations);

class Int8Linear : public Linear {
 public:
  // weight: [out, in] fp32, quantized here (kernels/ref/matmul_int8.h defines the format).
  Int8Linear(const std::vector<float>& weight, int out, int in, Int8Activations activations = Int8Activations::kFp32);
  // y[n, out] = x[n, in] · (scale ⊙ Q)^T through the plan's kernel: with fp32 activations the
  // W8A16 panels (or matmul_int8), with int16 ones x held per 32-block as int16 into
  // kernels/cpu/gemm_w8_int16 (in not a multiple of 32: the fp32 panels, exact activations), with
  // int8 ones x quantised per 32-block into the W8A8 panels or matmul_int8_act (the CPU; CUDA:
  // Int8CudaLinear).
  void forward(const float* x, float* y, int n, Device& device) const override;
  // With int8 activations on a build with AVX-512 VNNI: q is repacked into the panels of
  // kernels/cpu/gemm_panels_int8.h (decode and prefill both run from them) and the row-major
  // copy is released. With fp32 activations: a second copy of q as the W8A16 panels of
  // kernels/cpu/gemm_panels_w8.h, for every row count without the AMX bf16 tiles and up to
  // kW8PanelMaxRows with them (the plan, kernels/cpu/linear_plan.h; the row-major codes stay for
  // the tiles' prefill kernels, as the half linears keep their AMX copy). With int16 activations
  // and in a multiple of 32: a second copy as the panels of kernels/cpu/gemm_w8_int16.h, on the
  // same terms (the row-major codes stay for the AMX prefill); other in: the W8A16 panels.
  void pack_for_host();
  // Token rows up to which fp32 activations take the W8A16 panels where the AMX tiles run.
  static constexpr int kW8PanelMaxRows = cpu::kW8PanelMaxRows;
  // The plan's kernel: W8A16 (panels, then matmul_int8's), W8A16 int16 (its panels, then
  // matmul_int8's) or W8A8 (panels, or matmul_int8_act).
  std::string cpu_kernel(int rows) const override { return cpu::cpu_kernel_info(plan(rows)).name; }
  cpu::CpuKernel plan(int rows) const;
  // out*in bytes of int8 plus 4*out bytes of scales; in panels, plus their int16 block sums
  // (1/16 byte per weight) and in rounded up to 4.
  std::uint64_t weight_bytes() const override;
  // scale[row] · q[row, :].
  void dequantize_row(int row, float* out) const override;
  // With int8 activations: matmul_int8_act on blocks quantised by the caller.
  bool reads_act_blocks() const override { return activations_ == Int8Activations::kInt8; }
  Int8Activations activations() const { return activations_; }
  void forward_act_blocks(const std::int8_t* xq, const float* xs, float* y, int n, Device& device) const override;
  // A group of Int8Linears all in panels runs as one dispatch: with int8 activations (VNNI
  // builds) cpu::gemm_panels_int8_group, x quantised once; with int16 ones
  // cpu::gemm_w8_int16_group, x held once; with fp32 activations, where the plan takes the
  // panels, cpu::gemm_panels_w8_group. Any other group (another kind, the AMX tiles' rows): false.
  bool try_forward_group(std::span<const GroupMember> group, const float* x, int n, Device& device) const override;
  bool try_forward_group_act_blocks(std::span<const GroupMember> group, const std::int8_t* xq, const float* xs, int n,
                                    Device& device) const override;

  // Row-major codes; empty once pack_for_host has moved them into panels.
  const HugeVector<std::int8_t>& q() const { return q_; }
  const HugeVector<float>& scale() const { return scale_; }
  // W8A8 panels (pack_for_host with int8 activations and VNNI); empty otherwise.
  const cpu::PackedPanelsInt8& panels() const { return panels_; }
  // W8A16 decode panels (pack_for_host with fp32 activations on the CPU); empty otherwise.
  const cpu::PackedPanelsW8& w8_panels() const { return w8_; }
  // W8A16 int16 panels (pack_for_host with int16 activations, in a multiple of 32); empty otherwise.
  const cpu::PackedW8Int16& int16_panels() const { return i16_; }

 private:
  // On 2 MiB pages once large (inferlab/huge_pages.h): the decode row stream reads them once per
  // token, and on 4 KiB pages it ran at ~0.7 of the huge-page read probe (docs/kernels.md).
  HugeVector<std::int8_t> q_;  // [out, in] (empty when in panels_)
  cpu::PackedPanelsInt8 panels_;  // W8A8 with VNNI (pack_for_host); empty otherwise
  cpu::PackedPanelsW8 w8_;        // W8A16 decode panels (pack_for_host); empty otherwise
  cpu::PackedW8Int16 i16_;        // W8A16 int16 panels (pack_for_host); empty otherwise
  HugeVector<float> scale_;    // [out]
  Int8Activations activations_ = Int8Activations::kFp32;
  cpu::CpuFormat format() const;  // the plan's weight format
};

// The strategy on the CPU; Int8CudaQuantization (int8_cuda.h) places its linears on a GPU.
class Int8Quantization : public Quantization {
 public:
  explicit Int8Quantization(Int8Activations activations = Int8Activations::kFp32) : activations_(activations) {}
  using Quantization::make_linear;  // the overload taking calibration stays visible
  std::unique_ptr<Linear> make_linear(const std::string& name, std::vector<float> weight, int out,
                                      int in) override;

  // W8A8 on int8 tensor cores; weight-only: each weight converted and scaled (2 ops), then a
  // float multiply (int16 activations: an int16 dot on the CPU, 16-bit activations on a
  // simulated GPU).
  LinearArithmetic arithmetic(const std::string&, const ModelConfig&) const override {
    if (activations_ == Int8Activations::kInt8) return LinearArithmetic{true, false, true, 0};
    LinearArithmetic a{true, false, false, 2};
    a.int16_dot = activations_ == Int8Activations::kInt16;
    return a;
  }

 protected:
  // The linear as it runs on the strategy's device: on the CPU packed (pack_for_host).
  virtual std::unique_ptr<Linear> place(std::unique_ptr<Int8Linear> linear);
  Int8Activations activations() const { return activations_; }

 private:
  Int8Activations activations_ = Int8Activations::kFp32;
};

}  // namespace inferlab::plugins
