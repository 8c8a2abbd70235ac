#include "gguf_cuda_support.h"

#include <algorithm>
#include <map>

#include "inferlab/ggml_types.h"
#include "kernels/cuda/gguf.h"

namespace inferlab::plugins {

namespace {

std::size_t align256(std::size_t bytes) { return (bytes + 255) / 256 * 256; }

}  // namespace

bool gguf_cuda_accepts(std::uint32_t ggml_type) {
  switch (static_cast<GgmlType>(ggml_type)) {
    case GgmlType::kQ8_0:
    case GgmlType::kQ4_0:
    case GgmlType::kQ4_1:
    case GgmlType::kQ4_K:
    case GgmlType::kQ6_K:
    case GgmlType::kF32:
    case GgmlType::kF16:
    case GgmlType::kBF16:
      return true;
    default:
      return false;
  }
}

std::string gguf_cuda_allowed() {
  return "Q8_0, Q4_0, Q4_1, Q4_K, Q6_K (dp4a GEMV, f16 tensor-core prefill), F32, F16, BF16 (fp32)";
}

std::vector<std::string> gguf_cuda_problems(const ModelConfig& model, const Params& params) {
  std::vector<std::string> problems;
  struct Refused {
    std::string first;
    int more = 0;
  };
  std::map<std::uint32_t, Refused> refused;  // per type: the first tensor (in name order) and the count of others
  for (const auto& [name, type] : model.source_linear_types) {
    if (gguf_cuda_accepts(type) || name == "embedding") continue;  // the table's rows are read on the host
    auto [it, fresh] = refused.try_emplace(type, Refused{name, 0});
    if (!fresh) ++it->second.more;
  }
  for (const auto& [type, r] : refused)
    problems.push_back("tensor '" + r.first + "'" + (r.more > 0 ? " (and " + std::to_string(r.more) + " more)" : "") +
                       " is stored as " + ggml_type_name(type) + ", which quantization 'gguf' does not run on cuda (" +
                       "allowed on cuda: " + gguf_cuda_allowed() + ")");
  if (params.get_string("activations") != "int8")
    problems.push_back("activations = \"" + params.get_string("activations") +
                       "\" runs on cpu only (allowed on cuda: \"int8\": dp4a decode, f16 tensor-core prefill)");
  if (!params.get_bool("unpack"))
    problems.push_back("unpack = false changes only the CPU's packed panels (allowed on cuda: unpack = true)");
  return problems;
}

int gguf_cuda_tile_rows(int out, int in) {
  const std::size_t row = static_cast<std::size_t>(in) * 2;  // f16
  if (static_cast<std::size_t>(out) * row <= kGgufTileBytes) return out;
  const std::size_t rows = kGgufTileBytes / row / 128 * 128;
  return static_cast<int>(std::min<std::size_t>(static_cast<std::size_t>(out), std::max<std::size_t>(rows, 128)));
}

GgufCudaPlan gguf_cuda_plan(int n, int out, int in) {
  GgufCudaPlan p;
  const std::size_t cells = static_cast<std::size_t>(n) * static_cast<std::size_t>(in);
  p.gemv = n <= cuda::kGgufGemvMaxRows;
  if (p.gemv) {
    p.second = align256(cells);  // after xq
    p.bytes = p.second + cells / 32 * sizeof(float);
  } else {
    p.tile_rows = gguf_cuda_tile_rows(out, in);
    p.second = align256(cells * 2);  // after xh
    p.bytes = p.second + static_cast<std::size_t>(p.tile_rows) * static_cast<std::size_t>(in) * 2;
  }
  return p;
}

}  // namespace inferlab::plugins
