// quantization/gguf on a CUDA device (gguf_cuda.cpp, compiled only in a CUDA build): the
// descriptor's device map enters GgufCudaQuantization under kCuda, with gguf_cuda_problems as
// its per-device supports (Q8_0, Q4_0, Q4_1, Q4_K, Q6_K and float tensors only).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gguf_linear.h"
#include "inferlab/device/device.h"

namespace inferlab::plugins {

// One linear on its GGUF blocks in GPU memory, uploaded as the file stores them (no repacking,
// no requantisation: weight_bytes is the file's).
class GgufCudaLinear final : public Linear {
 public:
  // blocks: W [out, in] of a type gguf_cuda_accepts (Error otherwise, or for a wrong size),
  // copied to `device` (a CUDA device); the host blocks stay shared (dequantize_row reads them).
  GgufCudaLinear(std::shared_ptr<const SourceBlocks> blocks, int out, int in, Device& device);
  // n <= cuda::kGgufGemvMaxRows: x quantised per 32 on the GPU, dp4a GEMV on the blocks; more rows:
  // x to f16, W dequantised tile by tile to f16, cuBLAS tensor-core GEMM (gguf_cuda_plan).
  // The operands live in the device's grow-only workspace.
  void forward(const float* x, float* y, int n, Device& device) const override;
  // The same from activations already quantised per 32 (xq [n, in], xs [n, in / 32] in device
  // memory: [device] fuse = true quantises inside the RMSNorm / SwiGLU that produces x, on a
  // device whose fused ops write them): the GEMV directly; the GEMM widens them to f16.
  bool reads_act_blocks() const override { return true; }
  void forward_act_blocks(const std::int8_t* xq, const float* xs, float* y, int n, Device& device) const override;
  std::uint64_t weight_bytes() const override { return blocks_->bytes.size(); }
  // Row `row` decoded from the host blocks (the tied embedding's lookups stay on the host).
  void dequantize_row(int row, float* out) const override;
  GgmlType type() const { return type_; }

 private:
  GgmlType type_;
  std::shared_ptr<const SourceBlocks> blocks_;  // [out, row bytes] on the host
  Buffer device_blocks_;                        // the same bytes in GPU memory
};

// GgufQuantization whose linears run on `device`: native blocks as GgufCudaLinear, float
// tensors as FloatCudaLinear; an untied embedding table stays on the host (it only serves rows).
class GgufCudaQuantization final : public GgufQuantization {
 public:
  GgufCudaQuantization(const ModelWeights* weights, Device& device)
      : GgufQuantization(weights, /*int8_activations=*/true), device_(device) {}

 protected:
  std::unique_ptr<Linear> place_blocks(const std::string& name, std::shared_ptr<const SourceBlocks> blocks, int out,
                                       int in) override;
  std::unique_ptr<Linear> place_float(const std::string& name, std::vector<float> weight, int out, int in) override;
  bool repacks(GgmlType type) const override;

 private:
  Device& device_;
};

}  // namespace inferlab::plugins
