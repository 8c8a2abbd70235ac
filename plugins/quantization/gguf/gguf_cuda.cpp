// quantization/gguf on a CUDA device: the blocks uploaded as they are, and the forward there.
#include "gguf_cuda.h"

#include "gguf_cuda_support.h"
#include "inferlab/device/cuda_device.h"
#include "inferlab/device/device_upload.h"
#include "inferlab/error.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/gguf.h"
#include "kernels/cuda/quant_linear.h"
#include "plugins/common/quantization/float_linear_cuda.h"

namespace inferlab::plugins {

namespace {

std::shared_ptr<const SourceBlocks> checked(std::shared_ptr<const SourceBlocks> blocks, int out, int in) {
  check(blocks != nullptr, "quantization 'gguf': no blocks");
  check(gguf_cuda_accepts(blocks->ggml_type) && ggml_type_is_quantized(static_cast<GgmlType>(blocks->ggml_type)),
        "quantization 'gguf': " + ggml_type_name(blocks->ggml_type) + " blocks do not run on cuda (allowed on cuda: " +
            gguf_cuda_allowed() + ")");
  check_block_shape(*blocks, out, in);
  return blocks;
}

}  // namespace

GgufCudaLinear::GgufCudaLinear(std::shared_ptr<const SourceBlocks> blocks, int out, int in, Device& device)
    : Linear(out, in),
      type_(static_cast<GgmlType>(blocks ? blocks->ggml_type : 0)),
      blocks_(checked(std::move(blocks), out, in)) {
  (void)cuda_device(device, "quantization 'gguf'");  // an Error on any other device
  device_blocks_ = upload_to(device, blocks_->bytes);
}

void GgufCudaLinear::forward(const float* x, float* y, int n, Device& device) const {
  if (n <= 0) return;
  CudaDevice& cuda = cuda_device(device, "quantization 'gguf'");
  const int out = out_features(), in = in_features();
  const GgufCudaPlan plan = gguf_cuda_plan(n, out, in);
  char* ws = static_cast<char*>(cuda.workspace(plan.bytes));
  const auto* w = device_blocks_.as<std::uint8_t>();
  if (plan.gemv) {
    auto* xq = reinterpret_cast<std::int8_t*>(ws + plan.first);  // [n, in]
    auto* xs = reinterpret_cast<float*>(ws + plan.second);       // [n, in / 32]
    cuda::quantize_activations(x, nullptr, n, in, 32, xq, xs, cuda.stream());
    cuda::gguf_gemv(type_, w, xq, xs, y, n, out, in, cuda.stream());
    return;
  }
  auto* xh = reinterpret_cast<std::uint16_t*>(ws + plan.first);    // [n, in] f16
  auto* tile = reinterpret_cast<std::uint16_t*>(ws + plan.second);  // [tile_rows, in] f16
  cuda::convert_f32_to_half(x, xh, static_cast<std::size_t>(n) * static_cast<std::size_t>(in), cuda::HalfType::kF16,
                            cuda.stream());
  cuda::gguf_gemm_f16(cuda.cublas(), cuda.stream(), type_, w, xh, tile, plan.tile_rows, y, n, out, in);
}

void GgufCudaLinear::forward_act_blocks(const std::int8_t* xq, const float* xs, float* y, int n,
                                        Device& device) const {
  if (n <= 0) return;
  CudaDevice& cuda = cuda_device(device, "quantization 'gguf'");
  const int out = out_features(), in = in_features();
  const GgufCudaPlan plan = gguf_cuda_plan(n, out, in);
  const auto* w = device_blocks_.as<std::uint8_t>();
  if (plan.gemv) {
    cuda::gguf_gemv(type_, w, xq, xs, y, n, out, in, cuda.stream());
    return;
  }
  char* ws = static_cast<char*>(cuda.workspace(plan.bytes));
  auto* xh = reinterpret_cast<std::uint16_t*>(ws + plan.first);    // [n, in] f16
  auto* tile = reinterpret_cast<std::uint16_t*>(ws + plan.second);  // [tile_rows, in] f16
  cuda::gguf_act_blocks_to_f16(xq, xs, static_cast<long long>(n) * in, xh, cuda.stream());
  cuda::gguf_gemm_f16(cuda.cublas(), cuda.stream(), type_, w, xh, tile, plan.tile_rows, y, n, out, in);
}

void GgufCudaLinear::dequantize_row(int row, float* out) const {
  check_linear_row(*this, row, "quantization 'gguf'");
  const std::uint64_t row_bytes = ggml_tensor_bytes(type_, static_cast<std::uint64_t>(in_features()));
  dequantize(type_, blocks_->bytes.data() + static_cast<std::size_t>(row) * row_bytes,
             static_cast<std::size_t>(in_features()), out);
}

std::unique_ptr<Linear> GgufCudaQuantization::place_blocks(const std::string& name,
                                                           std::shared_ptr<const SourceBlocks> blocks, int out,
                                                           int in) {
  // An untied table serves row lookups only (Model::embed reads them on the host): no upload.
  if (name == "embedding")
    return std::make_unique<GgufBlockLinear>(std::move(blocks), out, in, /*int8_activations=*/false);
  return std::make_unique<GgufCudaLinear>(std::move(blocks), out, in, device_);
}

std::unique_ptr<Linear> GgufCudaQuantization::place_float(const std::string& name, std::vector<float> weight, int out,
                                                          int in) {
  if (name == "embedding") return GgufQuantization::place_float(name, std::move(weight), out, in);
  return std::make_unique<FloatCudaLinear>(weight, out, in, device_);
}

bool GgufCudaQuantization::repacks(GgmlType type) const {
  (void)type;  // the GPU runs the file's blocks as stored
  return false;
}

}  // namespace inferlab::plugins
