#include "gguf_linear.h"

#include <optional>

#include "inferlab/error.h"
#include "kernels/cpu/matmul_gguf.h"
#include "kernels/cpu/matmul_int8_act.h"
#include "plugins/common/quantization/float_linear.h"

namespace inferlab::plugins {

namespace {

std::string type_name(std::uint32_t t) { return ggml_type_name(t); }

constexpr const char* kAllowed =
    "allowed: Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS (native kernels), F32, F16, "
    "BF16 (fp32)";

// x [n, in] quantised per `block` (32; 256 for unpacked K-quants) into this thread's scratch, so
// linears on different devices never share: xq [n, in], xs [n, in / block].
struct ActBlocks {
  const std::int8_t* xq;
  const float* xs;
};
ActBlocks quantize_acts(const float* x, int n, int in, int block, ThreadPool& pool) {
  thread_local std::vector<std::int8_t> xq;
  thread_local std::vector<float> xs;
  xq.resize(static_cast<std::size_t>(n) * in);
  xs.resize(static_cast<std::size_t>(n) * (in / block));
  cpu::quantize_act_rows(x, n, in, xq.data(), xs.data(), pool, block);
  return {xq.data(), xs.data()};
}

// The group's panels when every member is a packed GgufBlockLinear, which runs on the CPU only
// (gemm_gguf_group's operands, filled into `out`); false otherwise.
bool packed_group(std::span<const GroupMember> group, std::vector<cpu::GemmGgufOutput>& out) {
  out.clear();
  for (const GroupMember& m : group) {
    const auto* g = dynamic_cast<const GgufBlockLinear*>(m.linear);
    if (g == nullptr || !g->packed()) return false;
    out.push_back({&g->packed_panels(), m.y});
  }
  return true;
}

}  // namespace

GgufBlockLinear::GgufBlockLinear(GgmlType type, std::vector<std::uint8_t> blocks, int out, int in,
                                 bool int8_activations, bool unpack, bool transcode)
    : GgufBlockLinear(std::make_shared<const SourceBlocks>(SourceBlocks{static_cast<std::uint32_t>(type), std::move(blocks)}),
                      out, in, int8_activations, unpack, transcode) {}

GgufBlockLinear::GgufBlockLinear(std::shared_ptr<const SourceBlocks> blocks, int out, int in, bool int8_activations,
                                 bool unpack, bool transcode)
    : Linear(out, in),
      type_(static_cast<GgmlType>(blocks ? blocks->ggml_type : 0)),
      blocks_(std::move(blocks)),
      int8_activations_(int8_activations) {
  check(blocks_ != nullptr, "quantization 'gguf': no blocks");
  const GgmlType type = type_;
  check(cpu::gguf_native_kernel(type), "quantization 'gguf': no native kernel for " +
                                           type_name(static_cast<std::uint32_t>(type)) + "; " + kAllowed);
  check_block_shape(*blocks_, out, in);
  if (int8_activations_ && cpu::gemm_gguf_available() &&
      (cpu::gemm_gguf_packs(type) || (transcode && cpu::gguf_transcodes_to_q8_0(type)))) {
    packed_ = cpu::gemm_gguf_packs(type) ? cpu::pack_gguf(type, blocks_->bytes, out, in)
                                         : cpu::pack_gguf(GgmlType::kQ8_0, cpu::transcode_to_q8_0(type, blocks_->bytes), out, in);
    packed_.unpack = unpack;
    blocks_.reset();
  }
}

std::uint64_t GgufBlockLinear::weight_bytes() const { return packed() ? cpu::packed_bytes(packed_) : blocks_->bytes.size(); }

cpu::CpuKernel GgufBlockLinear::plan(int rows) const {
  const cpu::CpuLinearShape shape{
      .out = out_features(), .in = in_features(), .type = packed() ? packed_.type : type_, .packed = packed()};
  return cpu::plan_cpu_linear(int8_activations_ ? cpu::CpuFormat::kGguf : cpu::CpuFormat::kGgufFp32, rows, shape,
                              cpu::CpuIsa::host());
}

void GgufBlockLinear::forward(const float* x, float* y, int n, Device& device) const {
  ThreadPool& pool = cpu_pool(device, "quantization 'gguf'");
  const int in = in_features();
  if (!int8_activations_) {
    cpu::matmul_gguf(type_, blocks_->bytes.data(), x, y, n, out_features(), in, pool);
    return;
  }
  const ActBlocks a = quantize_acts(x, n, in, packed() ? 32 : cpu::gguf_act_block(type_), pool);
  if (packed())
    cpu::gemm_gguf(a.xq, a.xs, packed_, y, n, pool);
  else
    cpu::matmul_gguf_act(type_, blocks_->bytes.data(), a.xq, a.xs, y, n, out_features(), in, pool);
}

void GgufBlockLinear::forward_act_blocks(const std::int8_t* xq, const float* xs, float* y, int n, Device& device) const {
  if (!packed()) Linear::forward_act_blocks(xq, xs, y, n, device);  // throws
  cpu::gemm_gguf(xq, xs, packed_, y, n, cpu_pool(device, "quantization 'gguf'"));
}

bool GgufBlockLinear::try_forward_group(std::span<const GroupMember> group, const float* x, int n,
                                        Device& device) const {
  thread_local std::vector<cpu::GemmGgufOutput> members;
  if (!packed_group(group, members)) return false;
  ThreadPool& pool = cpu_pool(device, "quantization 'gguf'");
  const ActBlocks a = quantize_acts(x, n, in_features(), 32, pool);  // once for all: the panels' blocks of 32
  cpu::gemm_gguf_group(a.xq, a.xs, members, n, pool);
  return true;
}

bool GgufBlockLinear::try_forward_group_act_blocks(std::span<const GroupMember> group, const std::int8_t* xq,
                                                   const float* xs, int n, Device& device) const {
  thread_local std::vector<cpu::GemmGgufOutput> members;
  if (!packed_group(group, members)) return false;
  cpu::gemm_gguf_group(xq, xs, members, n, cpu_pool(device, "quantization 'gguf'"));
  return true;
}

void GgufBlockLinear::dequantize_row(int row, float* out) const {
  check_linear_row(*this, row, "quantization 'gguf'");
  const GgmlType held = packed() ? packed_.type : type_;  // a transcoded Q5_0 / IQ4_NL: Q8_0
  const std::uint64_t row_bytes = ggml_tensor_bytes(held, static_cast<std::uint64_t>(in_features()));
  if (!packed()) {
    dequantize(held, blocks_->bytes.data() + static_cast<std::size_t>(row) * row_bytes,
               static_cast<std::size_t>(in_features()), out);
    return;
  }
  thread_local std::vector<std::uint8_t> unpacked;  // [row bytes]: the row as packed (the file's, or Q8_0's)
  unpacked.resize(row_bytes);
  cpu::unpack_gguf_row(packed_, row, unpacked.data());
  dequantize(held, unpacked.data(), static_cast<std::size_t>(in_features()), out);
}

void check_block_shape(const SourceBlocks& blocks, int out, int in) {
  const auto type = static_cast<GgmlType>(blocks.ggml_type);
  check(out > 0 && in > 0 && static_cast<std::size_t>(in) % ggml_block_elements(type) == 0,
        "quantization 'gguf': a [" + std::to_string(out) + ", " + std::to_string(in) + "] " +
            type_name(blocks.ggml_type) + " tensor needs rows of whole blocks of " +
            std::to_string(ggml_block_elements(type)));
  const std::uint64_t expect = static_cast<std::uint64_t>(out) * ggml_tensor_bytes(type, static_cast<std::uint64_t>(in));
  check(blocks.bytes.size() == expect, "quantization 'gguf': " + std::to_string(blocks.bytes.size()) + " bytes of " +
                                           type_name(blocks.ggml_type) + " blocks, a [" + std::to_string(out) + ", " +
                                           std::to_string(in) + "] tensor has " + std::to_string(expect));
}

bool gguf_strategy_accepts(std::uint32_t ggml_type) {
  if (!ggml_type_supported(ggml_type)) return false;
  const auto t = static_cast<GgmlType>(ggml_type);
  return cpu::gguf_native_kernel(t) || !ggml_type_is_quantized(t);
}

std::vector<std::string> gguf_strategy_problems(const ModelConfig& model) {
  if (model.source_linear_types.empty())
    return {"the model is not a GGUF checkpoint: quantization 'gguf' runs the file's own blocks (allowed: a "
            "[model] path to a .gguf file)"};
  std::vector<std::string> problems;
  for (const auto& [name, type] : model.source_linear_types)
    if (!gguf_strategy_accepts(type) && name != "embedding")  // a table of another type: its fp32 rows
      problems.push_back("tensor '" + name + "' is stored as " + type_name(type) + ", which has no kernel here (" +
                         kAllowed + ")");
  return problems;
}

namespace {

// The type linear `name` runs in natively: its header type when a kernel here runs it; none when
// the linear is not in the file or runs in fp32 (float tensors, a table without a kernel).
std::optional<GgmlType> native_type(const ModelConfig& model, const std::string& name) {
  const auto t = model.source_linear_types.find(name);
  if (t == model.source_linear_types.end() || !ggml_type_supported(t->second)) return std::nullopt;
  const auto type = static_cast<GgmlType>(t->second);
  return cpu::gguf_native_kernel(type) ? std::optional<GgmlType>(type) : std::nullopt;
}

}  // namespace

bool GgufQuantization::needs_values(const std::string& name) const {
  if (weights_ == nullptr) return true;
  const std::optional<GgmlType> type = native_type(weights_->config, name);
  if (!type) return true;
  const SourceBlocks* blocks = weights_->source_blocks(name);
  return blocks == nullptr || blocks->ggml_type != static_cast<std::uint32_t>(*type);  // make_linear says what is missing
}

std::uint64_t GgufQuantization::planned_bytes(const std::string& name, int out, int in, const ModelConfig& model) {
  const auto n = static_cast<std::uint64_t>(out) * static_cast<std::uint64_t>(in);
  const std::optional<GgmlType> type = native_type(model, name);
  if (!type || static_cast<std::uint64_t>(in) % ggml_block_elements(*type) != 0) return n * sizeof(float);  // fp32
  if (!repacks(*type)) return ggml_tensor_bytes(*type, static_cast<std::uint64_t>(in)) * out;
  const GgmlType held = cpu::gemm_gguf_packs(*type) ? *type : GgmlType::kQ8_0;  // transcoded Q5_0 / IQ4_NL
  const std::uint64_t row = ggml_tensor_bytes(held, static_cast<std::uint64_t>(in));
  const std::uint64_t padded = (static_cast<std::uint64_t>(out) + 31) / 32 * 32 * row;
  return (padded * 37 + 35) / 36;  // Q4_K's 148 per 144 and Q5_K's 180 per 176 are below 37/36
}

LinearArithmetic GgufQuantization::arithmetic(const std::string& name, const ModelConfig& model) const {
  const std::optional<GgmlType> type = native_type(model, name);
  if (!type || !ggml_type_is_quantized(*type)) return {true, true, false, 0};
  const bool k_quant = *type == GgmlType::kQ4_K || *type == GgmlType::kQ5_K || *type == GgmlType::kQ6_K;
  return {true, false, int8_activations_, k_quant ? 5.0 : 3.0};
}

std::unique_ptr<Linear> GgufQuantization::make_linear(const std::string& name, std::vector<float> weight, int out,
                                                      int in) {
  if (weights_ != nullptr) {
    const auto& types = weights_->config.source_linear_types;
    check(!types.empty(), "quantization 'gguf': the model is not a GGUF checkpoint");
    const auto t = types.find(name);
    check(t != types.end(), "quantization 'gguf': the GGUF has no tensor for linear " + name);
    // An untied embedding table only serves row lookups: one stored in a type without a kernel
    // here keeps the loader's exact fp32 rows instead of refusing the model.
    if (name == "embedding" && !gguf_strategy_accepts(t->second)) return std::make_unique<FloatLinear>(std::move(weight), out, in);
    check(gguf_strategy_accepts(t->second),
          "quantization 'gguf': " + name + " is stored as " + type_name(t->second) + "; " + kAllowed);
    const auto type = static_cast<GgmlType>(t->second);
    if (cpu::gguf_native_kernel(type)) {
      std::shared_ptr<const SourceBlocks> blocks = weights_->shared_source_blocks(name);
      check(blocks != nullptr && blocks->ggml_type == t->second,
            "quantization 'gguf': " + name + " is stored as " + type_name(t->second) +
                " but the loaded weights carry no such blocks for it");
      weight.clear();  // values a caller passed anyway: not needed
      weight.shrink_to_fit();
      return place_blocks(name, std::move(blocks), out, in);
    }
  }
  // Float tensors (F32, F16, BF16): the loader's fp32 copy.
  return place_float(name, std::move(weight), out, in);
}

std::unique_ptr<Linear> GgufQuantization::place_blocks(const std::string& name,
                                                       std::shared_ptr<const SourceBlocks> blocks, int out, int in) {
  (void)name;
  return std::make_unique<GgufBlockLinear>(std::move(blocks), out, in, int8_activations_, unpack_, transcode_);
}

std::unique_ptr<Linear> GgufQuantization::place_float(const std::string& name, std::vector<float> weight, int out,
                                                      int in) {
  (void)name;
  return std::make_unique<FloatLinear>(std::move(weight), out, in);
}

bool GgufQuantization::repacks(GgmlType type) const {
  return int8_activations_ && cpu::gemm_gguf_available() &&
         (cpu::gemm_gguf_packs(type) || (transcode_ && cpu::gguf_transcodes_to_q8_0(type)));
}

}  // namespace inferlab::plugins
