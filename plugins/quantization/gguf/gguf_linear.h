// Runs a GGUF checkpoint's linears on their own blocks (no dequantise-requantise): Q8_0, Q4_0,
// Q4_1, Q5_0, Q5_1, IQ4_NL, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K and IQ4_XS rows go to the native kernels
// of kernels/cpu/matmul_gguf (Q8_0, Q4_0, Q4_1, Q4_K, Q5_K, Q6_K packed for kernels/cpu/gemm_gguf
// with int8 activations on VNNI builds); F32/F16/BF16 tensors stay fp32.
// So inferlab and llama.cpp can be compared on identical bytes.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "inferlab/formats/formats.h"
#include "inferlab/plugin/plugin.h"
#include "inferlab/plugin/quantization.h"
#include "inferlab/model/weights.h"
#include "kernels/cpu/gemm_gguf.h"
#include "kernels/cpu/linear_plan.h"

namespace inferlab::plugins {

// One linear on its GGML blocks.
class GgufBlockLinear : public Linear {
 public:
  // blocks: W [out, in] as `out` rows of ggml_tensor_bytes(type, in) bytes, taken over. Throws
  // Error for a type without a native kernel or blocks of the wrong size.
  // unpack: whether prefill unpacks the packed panels (cpu::PackedGguf::unpack; same bits).
  // transcode: with int8 activations, Q5_0 / IQ4_NL blocks run as Q8_0 panels
  // (cpu::transcode_to_q8_0: the same integer dots, 34 bytes per block); false keeps the file's
  // blocks on matmul_gguf_act's row kernels.
  GgufBlockLinear(GgmlType type, std::vector<std::uint8_t> blocks, int out, int in, bool int8_activations,
                  bool unpack = true, bool transcode = true);
  // The same on blocks shared with the loaded weights (ModelWeights::shared_source_blocks): the
  // linear holds them, no copy (dropped here once packed; the weights keep theirs).
  GgufBlockLinear(std::shared_ptr<const SourceBlocks> blocks, int out, int in, bool int8_activations,
                  bool unpack = true, bool transcode = true);
  // With int8_activations on a build with the panels (AVX-512 VNNI or AVX2), Q8_0 / Q4_0 /
  // Q4_1 / Q4_K / Q5_K / Q6_K blocks are repacked here into cpu::gemm_gguf's panels, and Q5_0 /
  // IQ4_NL ones transcoded to Q8_0 panels (the file's bytes are then dropped: same codes, scales).
  // y[n, out] = x[n, in] · Wᵀ: fp32 activations (matmul_gguf), or x quantised per 32-block
  // (quantize_act_rows) and run by gemm_gguf when packed, else per 32 (256 for the K-quants) by
  // matmul_gguf_act, when int8_activations.
  void forward(const float* x, float* y, int n, Device& device) const override;
  // The plan's kernel (kernels/cpu/linear_plan.h): the packed blocks, or the file's rows.
  std::string cpu_kernel(int rows) const override { return cpu::cpu_kernel_info(plan(rows)).name; }
  cpu::CpuKernel plan(int rows) const;
  // Packed (gemm_gguf's panels, blocks of 32): the model may hand x already quantised per
  // 32-block ([device] fuse = true quantises once inside the RMSNorm / SwiGLU producing x).
  bool reads_act_blocks() const override { return packed(); }
  // xq [n, in], xs [n, in / 32]: cpu::gemm_gguf directly. Throws Error unless packed().
  void forward_act_blocks(const std::int8_t* xq, const float* xs, float* y, int n, Device& device) const override;
  // On the CPU, a group whose members are all packed GgufBlockLinears (any of Q8_0 / Q4_0 /
  // Q4_1 / Q4_K / Q6_K) runs as one cpu::gemm_gguf_group, x quantised once; any other group: false.
  bool try_forward_group(std::span<const GroupMember> group, const float* x, int n, Device& device) const override;
  bool try_forward_group_act_blocks(std::span<const GroupMember> group, const std::int8_t* xq, const float* xs, int n,
                                    Device& device) const override;
  // Row `row` decoded from its blocks (the embedding lookup of a tied classifier reads it).
  void dequantize_row(int row, float* out) const override;
  // The blocks' bytes, scales included: exactly the file's; packed, cpu::packed_bytes (the
  // file's, Q4_K's 148 per 144, and the rows padding out to a multiple of 32; transcoded Q5_0 /
  // IQ4_NL: Q8_0's 34 bytes per block).
  std::uint64_t weight_bytes() const override;
  // True when the blocks run packed by cpu::gemm_gguf.
  bool packed() const { return blocks_ == nullptr; }
  const cpu::PackedGguf& packed_panels() const { return packed_; }  // empty unless packed()
  GgmlType type() const { return type_; }  // the file's type (transcoded or not)
  // The blocks it runs (shared with the loaded weights when built by GgufQuantization); null
  // once packed.
  const SourceBlocks* blocks() const { return blocks_.get(); }

 private:
  GgmlType type_;
  std::shared_ptr<const SourceBlocks> blocks_;  // [out, row bytes]; null once packed
  cpu::PackedGguf packed_;            // gemm_gguf's panels (int8 activations, VNNI builds)
  bool int8_activations_;
};

// Throws Error unless `blocks` hold a [out, in] tensor of whole blocks of their type.
void check_block_shape(const SourceBlocks& blocks, int out, int in);

// The types whose tensors the strategy accepts: native ones, Q5_K (dequantised on load) and
// the float types (run in fp32).
bool gguf_strategy_accepts(std::uint32_t ggml_type);
// The reasons quantization/gguf cannot run a model of this config (empty = it can).
std::vector<std::string> gguf_strategy_problems(const ModelConfig& model);

class GgufQuantization : public Quantization {
 public:
  // weights: the run's weights with their stored blocks; null when planning (linears are then
  // built in fp32, an upper bound of the memory).
  GgufQuantization(const ModelWeights* weights, bool int8_activations, bool unpack = true, bool transcode = true)
      : weights_(weights), int8_activations_(int8_activations), unpack_(unpack), transcode_(transcode) {}
  using Quantization::make_linear;  // the overload taking calibration stays visible
  // The linear `name` on its GGUF blocks when it has some (then `weight` is empty: the model
  // asks needs_values first and dequantises nothing), else an fp32 linear of `weight`.
  std::unique_ptr<Linear> make_linear(const std::string& name, std::vector<float> weight, int out, int in) override;
  // False for a linear that runs on its stored blocks.
  bool needs_values(const std::string& name) const override;
  // From the header's types (model.source_linear_types), no weights needed: a native type's
  // blocks (packed: rows padded to 32, K-quant scales widened, bounded by 37/36), else fp32.
  std::uint64_t planned_bytes(const std::string& name, int out, int in, const ModelConfig& model) override;

  // A linear on its stored blocks: unpacked per block (3 ops per weight for Q4_0/Q4_1/Q8_0, 5
  // for the K-quants' sub-block scales) for a float multiply, or for an int8 one with int8
  // activations; a float tensor runs as the model's own weights.
  LinearArithmetic arithmetic(const std::string& name, const ModelConfig& model) const override;

 protected:
  // Where make_linear's linears live (the device implementation's hooks; the CPU's here):
  // `name` on its stored blocks of a native type (checked here), or a float linear.
  virtual std::unique_ptr<Linear> place_blocks(const std::string& name, std::shared_ptr<const SourceBlocks> blocks,
                                               int out, int in);
  virtual std::unique_ptr<Linear> place_float(const std::string& name, std::vector<float> weight, int out, int in);
  // Whether place_blocks repacks a native `type` into gemm_gguf's panels (planned_bytes' size).
  virtual bool repacks(GgmlType type) const;
  bool int8_activations() const { return int8_activations_; }

 private:
  const ModelWeights* weights_;
  bool int8_activations_;
  bool unpack_;
  bool transcode_;
};

}  // namespace inferlab::plugins
