// int8 quantization, per output channel, symmetric (the LLM.int8()/TensorRT-LLM "W8A16"
// scheme without outlier decomposition): each row of W gets scale = max|w_row| / 127 and
// q = round(w / scale). Weight memory falls about 4x, which is what a bandwidth-bound decode step
// pays for. Activations stay fp32 (activations = "fp32"), or are quantised on the fly to int8
// blocks of 32 with one scale each (activations = "int8": dynamic W8A8, integer dot products);
// the KV cache stays fp32.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "inferlab/quantization.h"
#include "kernels/cpu/gemm_panels_int8.h"

namespace inferlab::plugins {

class Int8Linear : public Linear {
 public:
  // weight: [out, in] fp32, quantized here (kernels/ref/matmul_int8.h defines the format).
  Int8Linear(const std::vector<float>& weight, int out, int in, bool int8_activations = false);
  // y[n, out] = x[n, in] · (scale ⊙ Q)^T through kernels/cpu/matmul_int8, or with x quantised
  // per 32-block through kernels/cpu/matmul_int8_act. On a CUDA device (after place_on):
  // kernels/cuda/quant_linear.cu, or the on-GPU activation blocks and __dp4a of quant_act.cu.
  void forward(const float* x, float* y, int n, Device& device) const override;
  // A CUDA device gets a copy of q and scale in its memory (the host copy stays). nullptr or
  // the CPU, with int8 activations on a build with AVX-512 VNNI: q is repacked into the panels
  // of kernels/cpu/gemm_panels_int8.h (decode and prefill both run from them) and the
  // row-major copy is released. Otherwise nothing to do.
  void place_on(Device* device);
  // out*in bytes of int8 plus 4*out bytes of scales; in panels, plus their int16 block sums
  // (1/16 byte per weight) and in rounded up to 4.
  std::uint64_t weight_bytes() const override;
  // scale[row] · q[row, :].
  void dequantize_row(int row, float* out) const override;
  // With int8 activations: matmul_int8_act on blocks quantised by the caller.
  bool reads_act_blocks() const override { return int8_activations_; }
  void forward_act_blocks(const std::int8_t* xq, const float* xs, float* y, int n, Device& device) const override;
  // On the CPU, a group of Int8Linears all in panels (int8 activations on a VNNI build) runs as
  // one cpu::gemm_panels_int8_group, x quantised once; any other group (a CUDA device, fp32
  // activations, another kind): false.
  bool try_forward_group(std::span<const GroupMember> group, const float* x, int n, Device& device) const override;
  bool try_forward_group_act_blocks(std::span<const GroupMember> group, const std::int8_t* xq, const float* xs, int n,
                                    Device& device) const override;

  // Row-major codes; empty once place_on has moved them into panels.
  const std::vector<std::int8_t>& q() const { return q_; }
  const std::vector<float>& scale() const { return scale_; }
  // W8A8 panels (place_on on the host with int8 activations and VNNI); empty otherwise.
  const cpu::PackedPanelsInt8& panels() const { return panels_; }

 private:
  std::vector<std::int8_t> q_;  // [out, in] (empty when in panels_)
  cpu::PackedPanelsInt8 panels_;  // W8A8 on the host with VNNI (place_on); empty otherwise
  std::vector<float> scale_;    // [out]
  bool int8_activations_ = false;
  Buffer device_q_, device_scale_;  // CUDA copies (place_on); empty otherwise
  void forward_cuda(const float* x, float* y, int n, Device& device) const;
  void pack_for_host();  // place_on's host case
};

class Int8Quantization : public Quantization {
 public:
  // device: where the linears run (a CUDA device gets their weights uploaded); nullptr = host.
  explicit Int8Quantization(bool int8_activations = false, Device* device = nullptr)
      : int8_activations_(int8_activations), device_(device) {}
  using Quantization::make_linear;  // the overload taking calibration stays visible
  std::unique_ptr<Linear> make_linear(const std::string& name, std::vector<float> weight, int out,
                                      int in) override;

  // W8A8 on int8 tensor cores; weight-only: each weight converted and scaled (2 ops), then a
  // float multiply.
  LinearArithmetic arithmetic(const std::string&, const ModelConfig&) const override {
    return int8_activations_ ? LinearArithmetic{true, false, true, 0} : LinearArithmetic{true, false, false, 2};
  }

 private:
  bool int8_activations_ = false;
  Device* device_ = nullptr;
};

}  // namespace inferlab::plugins
