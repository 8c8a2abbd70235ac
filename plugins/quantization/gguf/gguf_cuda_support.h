// The host side of quantization/gguf on CUDA, compiled in every build so the CPU tests check it:
// which tensor types run there (the descriptor's per-device supports refuses the rest before a
// run starts), and how a linear's forward splits into the decode GEMV and the prefill GEMM and
// cuts the device workspace between their operands (gguf_cuda.cpp's GgufCudaLinear).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "inferlab/model/model_config.h"
#include "inferlab/plugin/params.h"

namespace inferlab::plugins {

// Q8_0, Q4_0, Q4_1, Q4_K, Q6_K (kernels/cuda/gguf.h) and the float types (fp32 on cuBLAS).
bool gguf_cuda_accepts(std::uint32_t ggml_type);
// "Q8_0, Q4_0, Q4_1, Q4_K, Q6_K (dp4a GEMV, f16 tensor-core prefill), F32, F16, BF16 (fp32)".
std::string gguf_cuda_allowed();

// The reasons quantization/gguf cannot run this model with these parameters on cuda (empty =
// it can), one line each: per tensor type it cannot run (naming one tensor and how many more),
// and the CPU-only settings (activations = "fp32", unpack = false). An untied embedding table
// of any type is fine: it only serves row lookups on the host.
std::vector<std::string> gguf_cuda_problems(const ModelConfig& model, const Params& params);

// How GgufCudaLinear::forward runs n rows of a [out, in] linear, and where its operands sit in
// one device workspace (offsets 256-byte aligned).
struct GgufCudaPlan {
  bool gemv = true;          // n <= cuda::kGgufGemvMaxRows: quantise x per 32, dp4a GEMV
  int tile_rows = 0;         // GEMM: rows of W dequantised per tile (0 for the GEMV)
  std::size_t first = 0;     // GEMV: xq [n, in] int8; GEMM: xh [n, in] f16 — at offset 0
  std::size_t second = 0;    // offset of GEMV: xs [n, in / 32] fp32; GEMM: the f16 tile [tile_rows, in]
  std::size_t bytes = 0;     // the workspace it needs
};
GgufCudaPlan gguf_cuda_plan(int n, int out, int in);

// The f16 tile's rows: all of W when it fits kGgufTileBytes, else the most multiples of 128 rows
// that do (at least 128).
inline constexpr std::size_t kGgufTileBytes = std::size_t{32} << 20;
int gguf_cuda_tile_rows(int out, int in);

}  // namespace inferlab::plugins
