// Which CUDA kernel a quantized linear runs, chosen on the host from the number of activation rows
// and the weights' shape (plain C++: the CPU tests check every branch, tests/kernels/
// test_cuda_linear_plan.cpp). Decode (few rows) is bound by the weight stream, so it takes a GEMV
// that reads each weight once per pass; prefill (many rows) is bound by arithmetic, so it takes
// tensor cores. The constraints below are the kernels' own (quant_linear.cu, quant_act.cu,
// int4_mma.cu, int8_mma.cu, gemm_lt.cu); a shape that breaks one falls back to the kernel before
// it, never to a wrong result.
#pragma once

namespace inferlab::cuda {

enum class LinearKernel {
  kGemv,         // quant_linear.cu / quant_act.cu: one warp per output, 4/8-byte loads, any shape
  kGemv128,      // int4_mma.cu / int8_mma.cu: one warp per output, 128-bit loads of the weights
  kTiledFp32,    // quant_linear.cu: 64 x 64 tiles dequantised into shared memory, fp32 CUDA cores
  kTensorCore,   // int4_mma.cu / int8_mma.cu: mma.sync tiles (bf16 or s8), scales in registers
  kCublasLtInt8  // gemm_lt.cu: cuBLASLt int8 x int8 -> int32 (IMMA), then the scale epilogue
};

// Up to this many rows a linear is a GEMV (decode, a few sequences): an m16 tensor-core tile
// would be mostly padding and the weight stream dominates either way.
inline constexpr int kDecodeMaxRows = 8;

// The name in logs and tests.
inline const char* linear_kernel_name(LinearKernel k) {
  switch (k) {
    case LinearKernel::kGemv: return "gemv";
    case LinearKernel::kGemv128: return "gemv128";
    case LinearKernel::kTiledFp32: return "tiled_fp32";
    case LinearKernel::kTensorCore: return "tensor_core";
    case LinearKernel::kCublasLtInt8: return "cublaslt_int8";
  }
  return "?";
}

// int4 groups, fp32 activations (W4A16: int4, gptq, awq with activations = fp32). The 128-bit
// GEMV takes 32 codes per lane from one group (group_size % 32 == 0) and needs 16-byte aligned
// rows (in % 32 == 0); the tensor-core tile flushes its group scale every 32 codes (group_size %
// 32 == 0; any `in`, the tail is zero-filled). Rows 9..16 without tensor cores: one GEMV pass.
inline LinearKernel plan_int4_linear(int n, int in, int group_size) {
  const bool group32 = group_size > 0 && group_size % 32 == 0;
  if (n <= kDecodeMaxRows) return group32 && in % 32 == 0 ? LinearKernel::kGemv128 : LinearKernel::kGemv;
  if (group32) return LinearKernel::kTensorCore;
  return n <= 16 ? LinearKernel::kGemv : LinearKernel::kTiledFp32;
}

// int8 per output channel, fp32 activations (W8A16: int8 with activations = fp32). Decode takes
// the 128-bit GEMV (16 codes per lane: in % 16 == 0, else quant_linear.cu's 8-byte GEMV); prefill
// the bf16 tiles (int8 codes are exact in bf16; any shape).
inline LinearKernel plan_int8_linear(int n, int in) {
  if (n <= kDecodeMaxRows) return in % 16 == 0 ? LinearKernel::kGemv128 : LinearKernel::kGemv;
  return LinearKernel::kTensorCore;
}

// int8 activations in blocks of `block` codes per row with one scale each (W8A8 and W4A8: int8,
// int4, gptq, awq with activations = int8, block 32; SmoothQuant, block = in). The 128-bit GEMV
// gives each lane one 16-byte load of weights — 16 int8 codes, or 32 int4 codes — inside one
// block (block a multiple of that or one block per row) of a 16-byte aligned row (in a multiple
// of it too); the s8 tensor-core tile takes 32 codes per step, so its scales may
// change only every 32 (block % 32 == 0 or one block per row). int4 weights: group_size % 32 == 0
// (quant_act.cu's own requirement), so a step never straddles a group. per_token_lt: SmoothQuant's
// per-token scales, which cuBLASLt's int32 GEMM serves (its int8 operands need in % 4 == 0 and
// out % 4 == 0 for the IMMA kernels' leading dimensions).
inline LinearKernel plan_int8_act_linear(int n, int out, int in, int block, bool int4_weights, bool per_token_lt) {
  const bool one_block = block >= in;
  const int lane_codes = int4_weights ? 32 : 16;
  if (n <= kDecodeMaxRows)
    return in % lane_codes == 0 && (one_block || block % lane_codes == 0) ? LinearKernel::kGemv128
                                                                          : LinearKernel::kGemv;
  if (per_token_lt && one_block && in % 4 == 0 && out % 4 == 0) return LinearKernel::kCublasLtInt8;
  if (one_block || block % 32 == 0) return LinearKernel::kTensorCore;
  return LinearKernel::kGemv;
}

}  // namespace inferlab::cuda
